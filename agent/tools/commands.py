"""run_command: a shell command in the workspace, with a timeout, capped output and an optional
sandbox (see agent.sandbox). Where the session has a terminal (an editor's, over ACP), the command runs
in it, inside the same sandbox, and is reported the same way."""

from __future__ import annotations

import asyncio
import os
import signal

from agent.sandbox import SandboxUnavailable, confined_argv, setup_failure
from agent.terminal import TerminalFailed, TerminalRun
from agent.toolkit import ToolResult, error, tool
from agent.tools.context import ToolContext

HEAD_CHARS = 4_000
TAIL_CHARS = 8_000
MAX_COMMAND_BYTES = 100_000  # the OS refuses a single argument over 128 KiB (Linux MAX_ARG_STRLEN)


@tool("command", target="command", command="command", kind="execute", title=lambda a: f"Run `{a.get('command')}`")
async def run_command(ctx: ToolContext, command: str, timeout: int | None = None) -> ToolResult:
    """Run a shell command in the workspace root (e.g. the tests) and show its exit code and output.

    Args:
        command: The command line, run with /bin/sh in the workspace root.
        timeout: Seconds before the command is killed. Defaults to the configured command timeout.
    """
    if not command.strip():
        return error('command is empty; send the command line to run, e.g. "pytest -q".', "bad_arguments")
    problem = _unrunnable(command)
    if problem:
        return error(
            f"{problem}, so nothing was run. Put the long input or script in a file with create_file "
            "and run that file instead.",
            "bad_arguments",
        )
    limit = float(timeout) if timeout and timeout > 0 else ctx.settings.command_timeout
    if ctx.terminal is not None:
        return await _run_in_terminal(ctx, command, limit)
    try:
        process = await _start(ctx, command)
    except SandboxUnavailable as exc:
        return error(str(exc), "failed", target=command)
    except OSError as exc:  # the shell or sandbox program could not be started at all
        return error(f"The command could not start ({exc.strerror or exc}); nothing ran.", "failed", target=command)
    try:
        stdout, _ = await asyncio.wait_for(process.communicate(), timeout=limit)
    except (TimeoutError, asyncio.CancelledError) as exc:
        kill_group(process)
        stdout, _ = await process.communicate()
        if isinstance(exc, asyncio.CancelledError):
            raise
        return error(
            f"$ {command}\n[killed after {limit:g} s timeout]\n{cap_output(stdout.decode('utf-8', 'replace'))}\n"
            "Run something faster (e.g. a single test file), or pass a larger timeout.",
            "timeout",
            target=command,
        )
    return _exited(ctx, command, process.returncode, cap_output(stdout.decode("utf-8", "replace")))


def _exited(ctx: ToolContext, command: str, code: int | None, output: str) -> ToolResult:
    failed_setup = setup_failure(ctx.settings.sandbox, code, output)
    if failed_setup:
        return error(failed_setup, "failed", target=command)
    confined = "; sandboxed: writes only in the workspace, no network" if ctx.settings.sandbox != "none" else ""
    text = f"$ {command}\n[exit code {code}{confined}]\n{output}"
    kind = "exit_status" if code != 0 else None
    return ToolResult(text, kind, target=command, exit_code=code)


async def _run_in_terminal(ctx: ToolContext, command: str, limit: float) -> ToolResult:
    """The command in the session's terminal: the sandbox's wrapper (or /bin/sh) is the command the
    terminal starts, so it is confined exactly as a command run here."""
    assert ctx.terminal is not None
    root = ctx.workspace.root
    try:
        argv = confined_argv(ctx.settings.sandbox, root, command) or ["/bin/sh", "-c", command]
        run = await ctx.terminal.run(argv, root, {"TEACHBACK_AGENT": "1"}, limit, command)
    except SandboxUnavailable as exc:
        return error(str(exc), "failed", target=command)
    except TerminalFailed as exc:
        # The editor's fault, not the call's: "unavailable" is no call error, and says nothing ran for sure.
        return error(
            f"The editor's terminal failed, so this command's outcome is unknown: {exc}. Send the same command "
            "again once the editor's terminal works; teachback runs it without one when the editor offers none.",
            "unavailable",
            target=command,
        )
    return _ended_in_terminal(ctx, command, limit, run)


def _ended_in_terminal(ctx: ToolContext, command: str, limit: float, run: TerminalRun) -> ToolResult:
    output = cap_output(run.output)
    if run.truncated:
        output = f"[the terminal kept only the end of the output]\n{output}"
    if run.timed_out:
        return error(
            f"$ {command}\n[killed after {limit:g} s timeout]\n{output}\n"
            "Run something faster (e.g. a single test file), or pass a larger timeout.",
            "timeout",
            target=command,
        )
    if run.exit_code is None:  # a signal the agent did not send: the user stopped it in the editor
        return error(
            f"$ {command}\n[stopped in the editor's terminal by {run.signal or 'a signal'}]\n{output}\n"
            "The user stopped this command: do not run it again unless they ask for it.",
            "interrupted",
            target=command,
        )
    return _exited(ctx, command, run.exit_code, output)


def _unrunnable(command: str) -> str | None:
    """Why the OS would refuse to start `command`, if it would."""
    if "\x00" in command:
        return "The command holds a NUL byte, which no command line can carry"
    size = len(command.encode("utf-8"))
    if size > MAX_COMMAND_BYTES:
        return f"The command line is {size:,} bytes, over the {MAX_COMMAND_BYTES:,}-byte limit for one command"
    return None


async def _start(ctx: ToolContext, command: str) -> asyncio.subprocess.Process:
    """The command's process: under /bin/sh, in the configured sandbox if any."""
    options = {
        "cwd": ctx.workspace.root,
        "stdin": asyncio.subprocess.DEVNULL,
        "stdout": asyncio.subprocess.PIPE,
        "stderr": asyncio.subprocess.STDOUT,
        "start_new_session": True,  # its own process group, so a timeout kills its children too
        "env": {**os.environ, "TEACHBACK_AGENT": "1"},
    }
    argv = confined_argv(ctx.settings.sandbox, ctx.workspace.root, command)
    if argv is None:
        return await asyncio.create_subprocess_shell(command, **options)
    return await asyncio.create_subprocess_exec(*argv, **options)


def cap_output(text: str) -> str:
    """The head and tail of long output, with a note of what was cut."""
    if len(text) <= HEAD_CHARS + TAIL_CHARS:
        return text
    cut = len(text) - HEAD_CHARS - TAIL_CHARS
    return f"{text[:HEAD_CHARS]}\n[... {cut:,} characters cut ...]\n{text[-TAIL_CHARS:]}"


def kill_group(process: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        return  # already gone
