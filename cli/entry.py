"""The `teachback` command: the composition root. Each command imports what it needs lazily, so
`teachback --help` and `teachback lsp` start fast."""

from __future__ import annotations

import argparse
import asyncio
import io
import logging
import sys
from pathlib import Path

from agent.config import APPROVAL_MODES, ConfigError, Settings, load_settings

# 0: the turn finished; 1: it stopped (a limit, an interrupt, a model or internal error); 2: the
# command, the configuration, the database or the model cannot be used as given; 3: the session
# ran but some of its events are not in the feedback database.
EXIT_OK, EXIT_STOPPED, EXIT_USAGE, EXIT_UNRECORDED = 0, 1, 2, 3


def main(argv: list[str] | None = None) -> int:
    from feedback_store.errors import StoreError  # every package but agent loads lazily, here too

    parser = _parser()
    args = parser.parse_args(argv)
    for stream in (sys.stdout, sys.stderr):  # text the model sent may hold lone surrogates: shown escaped
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        return args.handler(args)
    except ConfigError as exc:
        print(f"teachback: configuration error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except StoreError as exc:
        print(f"teachback: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("teachback: interrupted", file=sys.stderr)
        return 130


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="teachback", description="A coding agent that learns from its mistakes.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="run the agent on an instruction, headless")
    _session_options(run)
    run.add_argument("--json", action="store_true", help="print the events as JSON lines")
    run.add_argument("--no-record", action="store_true", help="do not record the session in the feedback store")
    run.add_argument("instruction", help="what the agent should do")
    run.set_defaults(handler=_run)

    undo = sub.add_parser("undo", help="restore the working tree to the last checkpoint")
    undo.add_argument("--workspace", type=Path, default=Path.cwd())
    undo.set_defaults(handler=_undo)

    doctor = sub.add_parser("doctor", help="check git, the model, the database, the configuration and MCP servers")
    _session_options(doctor)
    doctor.set_defaults(handler=_doctor)

    from cli.export import add_export_arguments, add_stats_arguments

    add_export_arguments(sub.add_parser("export", help="export feedback pairs as training data"))
    sub.choices["export"].set_defaults(handler=_export)
    add_stats_arguments(sub.add_parser("stats", help="summarise the feedback store"))
    sub.choices["stats"].set_defaults(handler=_store_command("export", "stats_main"))
    from cli.lessons import add_lessons_arguments

    add_lessons_arguments(sub.add_parser("lessons", help="see, pin, edit and delete the lessons sessions are shown"))
    sub.choices["lessons"].set_defaults(handler=_store_command("lessons", "lessons_main"))
    from cli.team import TEAM_COMMANDS

    for name, (summary, add_arguments, entry) in TEAM_COMMANDS.items():
        add_arguments(sub.add_parser(name, help=summary))
        sub.choices[name].set_defaults(handler=_team(entry))

    from cli.mcp import add_mcp_arguments

    add_mcp_arguments(sub.add_parser("mcp", help="allow or revoke the MCP servers a workspace defines"))
    sub.choices["mcp"].set_defaults(handler=_mcp)

    lsp = sub.add_parser("lsp", help="run the language server (stdio unless --tcp)")
    lsp.add_argument("--tcp", metavar="HOST:PORT", help="listen on TCP instead of stdio")
    lsp.set_defaults(handler=lambda a: __import__("lsp_server").main(a.tcp))

    acp = sub.add_parser("acp", help="run the Agent Client Protocol agent on stdio (an editor's agent panel)")
    acp.set_defaults(handler=lambda a: __import__("acp_server").main())

    tui = sub.add_parser("tui", help="open the terminal app")
    tui.add_argument("workspace", nargs="?", type=Path, default=Path.cwd())
    tui.set_defaults(handler=_tui)

    repo_map = sub.add_parser("map", help="print the repository map")
    repo_map.add_argument("--workspace", type=Path, default=Path.cwd())
    repo_map.add_argument("--focus", nargs="*", default=[], help="files or identifiers to centre the map on")
    repo_map.add_argument("--tokens", type=int, default=None, help="token budget (default: repo_map_tokens)")
    repo_map.set_defaults(handler=_map)

    demo = sub.add_parser("demo", help="run the agent offline on a sample project with the embedded model")
    demo.add_argument("--dest", type=Path, default=None, help="where to put the sample project (default: a temp dir)")
    demo.add_argument("--model", default=None, help="model to use instead of the embedded one")
    demo.add_argument("--max-steps", type=int, default=12)
    demo.add_argument(
        "--learn",
        action="store_true",
        help="then one short learning round on the bundled task suite, and its before/after table (needs the train extra)",
    )
    demo.set_defaults(handler=_demo)

    # `tasks` and `bench` parse the rest of the line with their own parser (cli.tasks), imported only
    # when one of them runs; prefix_chars keeps argparse from reading their options here.
    for name, summary in (
        (
            "tasks",
            "make graded tasks from a repository (synth), run attempts at them (run), sample training data at their recorded states (branch)",
        ),
        ("bench", "score a model on a task suite, or compare two bench runs"),
    ):
        command = sub.add_parser(name, help=summary, add_help=False, prefix_chars="\0")
        command.add_argument("arguments", nargs="*")
        command.set_defaults(
            handler=lambda a, name=name: __import__("cli.tasks", fromlist=["main"]).main(name, a.arguments)
        )
    # The trainer's commands (cli.train, the optional `train` extra), the same way.
    for name, summary in (
        ("train", "train a LoRA adapter on exported feedback pairs (sdpo, sft, dpo, mix)"),
        ("eval", "evaluate a trained adapter against the model without it"),
        ("learn", "one round of export, train, evaluate and promote (or keep the current adapter)"),
    ):
        command = sub.add_parser(name, help=summary, add_help=False, prefix_chars="\0")
        command.add_argument("arguments", nargs="*")
        command.set_defaults(
            handler=lambda a, name=name: __import__("cli.train", fromlist=["main"]).main(name, a.arguments)
        )
    return parser


def _session_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workspace", type=Path, default=Path.cwd(), help="project root (default: cwd)")
    parser.add_argument("--model", help="litellm model string, e.g. anthropic/claude-sonnet-4-5")
    parser.add_argument("--approval", choices=APPROVAL_MODES, help="when to ask before edits and commands")
    parser.add_argument("--max-steps", type=int, help="stop after this many model calls per turn")
    parser.add_argument("--max-cost", type=float, help="stop once a turn has cost this many USD")
    parser.add_argument("--db", help="feedback database (default: $TEACHBACK_HOME/feedback.db)")


def settings_for(args: argparse.Namespace) -> Settings:
    base = load_settings(args.workspace)
    return base.replace(
        model=args.model, approval=args.approval, max_steps=args.max_steps, max_cost=args.max_cost, db=args.db
    )


def _run(args: argparse.Namespace) -> int:
    from agent.approval_prompt import TerminalApprover
    from agent.llm import MODEL_USAGE_ERRORS
    from agent.protocol import ErrorEvent, UserInput
    from agent.runtime import open_session
    from agent.transcript import JsonLines, Transcript
    from agent.workspace import WorkspaceError

    settings = settings_for(args)
    lessons = open_lessons(settings)
    try:
        session = open_session(args.workspace, settings, frontend="cli", lessons=lessons)
    except WorkspaceError as exc:
        print(f"teachback: {exc}", file=sys.stderr)
        return EXIT_USAGE
    show = JsonLines() if args.json else Transcript()
    recording = None
    if not args.no_record and settings.record:
        recording = _recording(settings, session, show)  # shows each event once it is recorded
        if recording is None:
            return EXIT_USAGE
    else:
        session.subscribe(show)
    errors: list[str] = []
    session.subscribe(lambda event: errors.append(event.kind) if isinstance(event, ErrorEvent) else None)
    TerminalApprover(session)
    finished = _drive(session, UserInput(text=args.instruction))
    if lessons is not None:
        lessons.close()
    if any(kind in MODEL_USAGE_ERRORS for kind in errors):
        code = EXIT_USAGE
    else:
        code = EXIT_OK if finished.reason in ("finished", "answered") else EXIT_STOPPED
    return _finish_recording(recording, session.id, code) if recording else code


def open_lessons(settings: Settings):
    """The lessons a session is shown (feedback_store.lessons), or None when they are off or nothing
    has been recorded yet."""
    from feedback_store.lessons import book_for

    return book_for(settings)


def _drive(session, op):
    loop = asyncio.new_event_loop()
    task = loop.create_task(session.run(op))
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


def _finish_recording(recording, session_id: str, code: int) -> int:
    """Write what is still pending (waiting the full db_wait); exit 3 when anything is lost."""
    unrecorded = recording.close(close_store=True)
    if unrecorded:
        print(
            f"teachback: RECORDING FAILED: {len(unrecorded)} event(s) of session {session_id} are not in "
            f"the feedback database {recording.store.path}; the session itself ran (its output is above). "
            f"{recording.error or 'See the messages above.'}",
            file=sys.stderr,
        )
        return EXIT_UNRECORDED
    return code


def _recording(settings: Settings, session, show):
    """The run's recording (feedback_store.recording), or None when the database cannot be written."""
    from feedback_store import StoreError, attach, open_store

    store = None
    try:
        store = open_store(settings.db_path(), timeout=settings.db_wait)
        store.check_writable()  # a read-only database stops the run before it acts
    except StoreError as exc:
        if store is not None:
            store.close()
        print(f"teachback: {exc}\n(or pass --no-record to run without recording)", file=sys.stderr)
        return None
    return attach(session, store, then=show, warn=lambda message: print(f"teachback: {message}", file=sys.stderr))


def _undo(args: argparse.Namespace) -> int:
    from agent.checkpoint import UndoError, undo_last

    try:
        restored = undo_last(args.workspace)
    except UndoError as exc:
        print(f"teachback: {exc}", file=sys.stderr)
        return EXIT_STOPPED
    print("Restored:" if restored else "The working tree already matches the last checkpoint.")
    for path in restored:
        print(f"  {path}")
    return EXIT_OK


def _doctor(args: argparse.Namespace) -> int:
    from agent.doctor import run_checks

    return run_checks(args.workspace, lambda: settings_for(args), _database_problem)


def _mcp(args: argparse.Namespace) -> int:
    from cli.mcp import mcp_main

    return mcp_main(args)


def _database_problem(path: Path) -> str | None:
    """Why the feedback database at `path` cannot be opened, or None when it can."""
    from feedback_store import StoreError, open_store

    try:
        open_store(path).close()
    except StoreError as exc:
        return str(exc)
    return None


def _store_command(module: str, name: str, *, several: bool = False):
    """The handler of a feedback_store command; without --db it reads the configured database
    (`db` in teachback.toml or TEACHBACK_DB), else the default one."""

    def handler(args: argparse.Namespace) -> int:
        from importlib import import_module

        if not args.db:
            default = str(load_settings(Path.cwd()).db_path())
            args.db = [default] if several else default
        return getattr(import_module(f"cli.{module}"), name)(args)

    return handler


def _team(entry: str):
    """A team command (import, share, unshare, merge), told how a folder's repository is named."""

    def handler(args: argparse.Namespace) -> int:
        from agent.runtime import repository_identity

        args.identify = repository_identity
        return _store_command("team", entry)(args)

    return handler


def _export(args: argparse.Namespace) -> int:
    """`teachback export`, with the tokenizer --tokenizer names (or the embedded model's when
    --max-tokens needs exact counts) built here, where the model providers are."""
    from agent.providers.llama_engine import LocalModelError, token_counter

    try:
        args.counter = token_counter(args.tokenizer, exact=args.max_tokens is not None)
    except LocalModelError as exc:
        print(
            f"teachback export: --tokenizer {args.tokenizer}: {exc} Use local/smollm2, a .gguf path or estimate.",
            file=sys.stderr,
        )
        return 1
    return _store_command("export", "export_main", several=True)(args)


def _demo(args: argparse.Namespace) -> int:
    from cli.demo import run_demo

    dest = args.dest
    if args.learn and dest is None:  # the round's files go beside the demo's
        import tempfile

        dest = Path(tempfile.mkdtemp(prefix="teachback-demo-"))
    code = run_demo(DemoDatabase, dest, model=args.model, max_steps=args.max_steps)
    if code or not args.learn:
        return code
    from trainer.demo_learn import run_learn

    return run_learn(dest)


class DemoDatabase:
    """The demo's feedback database (agent.interfaces.DemoFeedback)."""

    def __init__(self, path: Path) -> None:
        from feedback_store import open_store

        self.path = path
        self.store = open_store(path)

    def attach(self, session):
        from feedback_store import attach

        return attach(session, self.store, warn=lambda message: print(f"teachback demo: {message}", file=sys.stderr))

    def pairs(self) -> list:
        return self.store.pairs()

    def export(self, fmt: str, out: Path) -> tuple[int, list[Path], dict[str, int]] | None:
        from feedback_store.export import EmptyExport, export

        try:
            result = export([self.path], fmt, out)
        except EmptyExport:
            return None
        return result.records, list(result.paths), dict(result.left_out)

    def close(self) -> None:
        self.store.close()


def _tui(args: argparse.Namespace) -> int:
    import tui

    return tui.main(args.workspace, load_settings(args.workspace))


def _map(args: argparse.Namespace) -> int:
    from cli.map import map_main

    tokens = args.tokens if args.tokens is not None else load_settings(args.workspace).repo_map_tokens
    return map_main(args.workspace, args.focus, tokens)


if __name__ == "__main__":
    sys.exit(main())
