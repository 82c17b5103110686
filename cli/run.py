"""`teachback run`: one headless turn on an instruction, shown as a transcript (or JSON lines) and
recorded in the feedback store."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from typing import NoReturn

from agent.config import Settings
from cli.options import EXIT_OK, EXIT_STOPPED, EXIT_UNRECORDED, EXIT_USAGE, add_session_options, settings_for
from cli.run_lines import closing, header, say

EMPTY_INSTRUCTION = 'the instruction is empty: say what the agent should do, e.g. teachback run "make the tests pass"'


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    add_session_options(parser)
    parser.add_argument("--json", action="store_true", help="print the events as JSON lines")
    parser.add_argument("--no-record", action="store_true", help="do not record the session in the feedback store")
    parser.add_argument("instruction", help="what the agent should do")


def run_main(args: argparse.Namespace) -> int:
    from agent.llm import MODEL_USAGE_ERRORS
    from agent.model import resolved_tool_mode
    from agent.protocol import ErrorEvent, UserInput
    from agent.workspace import WorkspaceError
    from cli.approval_prompt import TerminalApprover
    from cli.transcript import JsonLines, Transcript
    from feedback_store import StoreError
    from host.session import IfNoStore, open_recorded

    if not args.instruction.strip():
        print(f"teachback: {EMPTY_INSTRUCTION}", file=sys.stderr)
        return EXIT_USAGE
    settings = settings_for(args)
    record = not args.no_record and settings.record
    say(header(settings, args.workspace, record))
    problem = _start_problem(settings)
    if problem is not None:  # nothing has run: no session to record
        print(f"teachback: {problem}", file=sys.stderr)
        return EXIT_USAGE
    # sys.stdout as it is now: the printers' default is the one when cli.transcript was first imported
    show = (
        JsonLines(sys.stdout)
        if args.json
        else Transcript(sys.stdout, calls_in_text=resolved_tool_mode(settings.model, settings.tool_mode) != "native")
    )
    try:
        hosted = open_recorded(
            args.workspace,
            settings,
            frontend="cli",
            if_no_store=IfNoStore.REFUSE,
            record=record,
            then=show,  # each event shown once it is recorded
            warn=lambda message: print(f"teachback: {message}", file=sys.stderr),
        )
    except WorkspaceError as exc:
        print(f"teachback: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except StoreError as exc:
        print(f"teachback: {exc}\n(or pass --no-record to run without recording)", file=sys.stderr)
        return EXIT_USAGE
    session = hosted.session
    errors: list[str] = []
    session.subscribe(lambda event: errors.append(event.kind) if isinstance(event, ErrorEvent) else None)
    TerminalApprover(session)
    finished = _drive(session, UserInput(text=args.instruction))
    if any(kind in MODEL_USAGE_ERRORS for kind in errors):
        code = EXIT_USAGE
    else:
        code = EXIT_OK if finished.reason in ("finished", "answered") else EXIT_STOPPED
    if hosted.recording is None:
        hosted.close()
        say("not recorded" + (" (--no-record)" if args.no_record else " (record = false)"))
    else:
        code = _finish_recording(hosted, session.id, code)
    if finished.reason == "interrupted":
        _leave(code)
    return code


def _leave(code: int) -> NoReturn:
    """Exit now, after Ctrl-C: everything is written and closed, and the interpreter's teardown
    (litellm's modules, the loaded model) would keep the person waiting seconds more."""
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(code)


def _start_problem(settings: Settings) -> str | None:
    """Why the model cannot start (a typo'd name, a missing key, the embedded model not installed),
    found before the session begins; None when it may run. Loads litellm, which the first model
    call would load anyway; Ctrl-C meanwhile ends the process at once (nothing has run, nothing is
    recorded), since a KeyboardInterrupt raised inside a library's import can be caught there."""
    from agent.llm import load_litellm
    from agent.model_names import start_problem

    previous = signal.signal(signal.SIGINT, _exit_interrupted)
    try:
        return start_problem(load_litellm(), settings.model, settings.api_base)
    finally:
        signal.signal(signal.SIGINT, previous)


def _exit_interrupted(signum: int, frame: object) -> None:
    print("\nteachback: interrupted before the session started; nothing was recorded", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(130)


def _drive(session, op):
    loop = asyncio.new_event_loop()
    task = loop.create_task(_turns(session, op))
    while True:
        try:
            finished = loop.run_until_complete(task)
            break
        except KeyboardInterrupt:  # first Ctrl-C: stop cooperatively at the next step
            print("\nteachback: interrupting (Ctrl-C again to abort)", file=sys.stderr)
            session.interrupt()
            try:
                finished = loop.run_until_complete(task)
                break
            except KeyboardInterrupt:
                task.cancel()
                raise
    loop.run_until_complete(session.close())  # stops its MCP servers
    _settle(loop)
    loop.close()
    return finished


async def _turns(session, op):
    """The turn of `op`, then, while a plan-mode turn leaves a plan waiting, the user's verdict on
    it asked on the terminal and the turn that follows it; the last TurnFinished."""
    from cli.approval_prompt import ask_plan

    finished = await session.run(op)
    while session.plans.pending is not None and finished.reason != "interrupted":
        verdict = await asyncio.to_thread(ask_plan)
        if verdict is None:
            break
        finished = await session.submit(verdict)
    return finished


def _settle(loop: asyncio.AbstractEventLoop, wait: float = 5.0) -> None:
    """Let work the turn left behind (litellm's usage logging) finish, for up to `wait` s, then
    cancel the rest: a task destroyed while pending prints a traceback at exit."""
    pending = asyncio.all_tasks(loop)
    if pending:
        _, late = loop.run_until_complete(asyncio.wait(pending, timeout=wait))
        for task in late:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    loop.run_until_complete(loop.shutdown_asyncgens())


def _finish_recording(hosted, session_id: str, code: int) -> int:
    """Write what is still pending (waiting the full db_wait) and say what was recorded; exit 3 when
    anything is lost."""
    unrecorded = hosted.stop()
    try:
        if unrecorded:
            print(
                f"teachback: RECORDING FAILED: {len(unrecorded)} event(s) of session {session_id} are not in "
                f"the feedback database {hosted.store.path}; the session itself ran (its output is above). "
                f"{hosted.recording.error or 'See the messages above.'}",
                file=sys.stderr,
            )
            return EXIT_UNRECORDED
        say(closing(hosted.store, session_id))
        return code
    finally:
        hosted.close()
