"""`teachback acp`: the Agent Client Protocol agent, on stdio, over the protocol's own library.

Each handler is short: it finds the session, asks it (acp_server.session), and builds the answer.
Nothing here waits on the model: turns run in worker processes (acp_server.worker), and neither
litellm nor the store is imported on the way to answering `initialize`. A worker is started right
after `initialize`, so the first session's imports warm up while the editor sets itself up.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from importlib.util import find_spec
from pathlib import Path
from typing import Any, BinaryIO

from acp import PROTOCOL_VERSION, RequestError, run_agent
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    McpCapabilities,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    ResumeSessionResponse,
    SessionCapabilities,
    SessionListCapabilities,
    SessionResumeCapabilities,
    SetSessionModeResponse,
)

from acp_server.commands import command_in
from acp_server.history import listed_sessions, recorded_events
from acp_server.prompting import mcp_entries, user_input
from acp_server.session import AcpSession, ClientOffers
from acp_server.wire import LINE_LIMIT, LineTransport
from acp_server.worker import WORKER
from agent.config import ConfigError, load_settings, user_config_path
from agent.protocol import new_id
from agent.remote import WorkerStopped
from agent.session_server import log_to_stderr, protocol_stream
from host.worker import SpareWorker

log = logging.getLogger(__name__)


class TeachbackAgent:
    """The agent side of ACP (acp.interfaces.Agent): sessions by id, each with its own worker."""

    def __init__(self, broad_workspaces: Sequence[Path] = ()) -> None:
        self.client: Any = None  # the editor (AgentSideConnection), set on connect
        # The root or the home folder named by `--workspace`: the only way, beside the user's own
        # settings, to make one of them a session's folder (an editor's cwd alone never does).
        self.broad_workspaces = {folder.expanduser().resolve() for folder in broad_workspaces}
        self.offers = ClientOffers()
        self.sessions: dict[str, AcpSession] = {}
        self._spare = SpareWorker(WORKER)  # the next session's worker, started ahead to warm up
        self._tasks: set[asyncio.Task[Any]] = set()

    def on_connect(self, conn: Any) -> None:
        self.client = conn

    async def initialize(
        self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None, **kwargs: Any
    ) -> InitializeResponse:
        caps = client_capabilities
        fs = caps.fs if caps is not None else None
        self.offers = ClientOffers(
            read=bool(fs and fs.read_text_file),
            write=bool(fs and fs.write_text_file),
            terminal=bool(caps and caps.terminal),
        )
        self._spawn(self._spare.start())
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(embedded_context=True, image=False, audio=False),
                mcp_capabilities=McpCapabilities(http=_has_mcp(), sse=False),
                session_capabilities=SessionCapabilities(
                    list=SessionListCapabilities(), resume=SessionResumeCapabilities()
                ),
            ),
            agent_info=Implementation(name="teachback", title="teachback", version=_version()),
            auth_methods=[],
        )

    async def new_session(self, cwd: str, mcp_servers: list[Any] | None = None, **kwargs: Any) -> NewSessionResponse:
        session = self._session_for(cwd, new_id(), mcp_servers)
        self.sessions[session.id] = session
        self._spawn(session.open(self._spare.take()))  # its worker opens while the editor waits for a prompt
        session.advertise()
        return NewSessionResponse(session_id=session.id, modes=session.modes())

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: list[Any] | None = None, **kwargs: Any
    ) -> LoadSessionResponse:
        self._refuse_open(session_id)
        session = self._session_for(cwd, session_id, mcp_servers)
        # Registered only once its history is found and replayed: a failed load leaves nothing that a
        # later prompt could run under the client's id.
        try:
            events = await asyncio.to_thread(recorded_events, session.settings, session_id)
            session.recorded = True
            await session.replay(events)
            self._refuse_open(session_id)  # a second load of the same id finished first
        except BaseException:
            await session.close()
            raise
        self.sessions[session_id] = session
        self._spawn(session.open(self._spare.take()))
        session.advertise()
        return LoadSessionResponse(modes=session.modes())

    async def resume_session(
        self, cwd: str, session_id: str, mcp_servers: list[Any] | None = None, **kwargs: Any
    ) -> ResumeSessionResponse:
        """session/load without the replay: the conversation goes on from the store."""
        self._refuse_open(session_id)
        session = self._session_for(cwd, session_id, mcp_servers)
        try:
            await asyncio.to_thread(recorded_events, session.settings, session_id)
            self._refuse_open(session_id)
        except BaseException:
            await session.close()
            raise
        session.recorded = True
        self.sessions[session_id] = session
        self._spawn(session.open(self._spare.take()))
        session.advertise()
        return ResumeSessionResponse(modes=session.modes())

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> ListSessionsResponse:
        """The sessions recorded in folder `cwd` (every folder's, without it), newest first."""
        root = None
        if cwd is not None:
            root = Path(cwd)
            if not root.is_absolute() or not root.is_dir():
                raise RequestError.invalid_params({"details": f"cwd {cwd!r} is not an absolute path to a folder"})
        try:
            settings = load_settings(root)
        except ConfigError as exc:
            raise RequestError.invalid_params({"details": f"{exc} Fix the setting, then list again."}) from exc
        return await asyncio.to_thread(listed_sessions, settings, root, cursor)

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        session = self._session(session_id)
        op = user_input(prompt, session.root)
        if not op.text and not op.context:
            raise RequestError.invalid_params({"details": "the prompt holds no text; type an instruction"})
        command = command_in(op.text) if not op.context else None
        if command is not None:
            return PromptResponse(stop_reason=await session.command(command))
        return PromptResponse(stop_reason=await session.prompt(op))

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> SetSessionModeResponse:
        await self._session(session_id).set_mode(mode_id)
        return SetSessionModeResponse()

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self.sessions.get(session_id)
        if session is not None:
            session.cancel()

    async def close(self) -> None:
        """The editor went away: stop every turn and worker."""
        for session in self.sessions.values():
            await session.close()
        await self._spare.close()

    # -- helpers ------------------------------------------------------------------------------

    def _session_for(self, cwd: str, session_id: str, mcp_servers: list[Any] | None) -> AcpSession:
        """A session on folder `cwd`, not yet registered."""
        root = Path(cwd)
        if not root.is_absolute() or not root.is_dir():
            raise RequestError.invalid_params({"details": f"cwd {cwd!r} is not an absolute path to a folder"})
        try:
            self._refuse_broad(root.resolve())
            settings = load_settings(root)
        except ConfigError as exc:
            raise RequestError.invalid_params({"details": f"{exc} Fix the setting, then open a new session."}) from exc
        entries = mcp_entries(mcp_servers)
        session = AcpSession(self.client, session_id, root.resolve(), settings, self.offers, entries)
        skipped = sorted({s.name for s in mcp_servers or ()} - {e["name"] for e in entries})
        if skipped:
            session.warnings.append(
                f"the MCP server(s) {', '.join(skipped)} use SSE, which teachback does not speak; give their "
                "streamable-HTTP URL instead"
            )
        return session

    def _refuse_broad(self, root: Path) -> None:
        """Refuse the file system's root or the home folder itself as a workspace, unless allowed by
        `--workspace` or the user's own settings (not the workspace's teachback.toml)."""
        what = broad_folder(root)
        if what is None or root in self.broad_workspaces:
            return
        allowed = load_settings(None).broad_workspaces  # the user's config and environment only
        if root in {Path(folder).expanduser().resolve() for folder in allowed}:
            return
        raise RequestError.invalid_params(
            {
                "details": f"the session's folder {str(root)!r} is {what}: every file under it would be the agent's "
                "workspace. Open a project folder instead; to allow this one, start the agent with "
                f"`teachback acp --workspace {root}` in the editor's agent settings, or add broad_workspaces = "
                f'["{root}"] to {user_config_path()}.'
            }
        )

    def _refuse_open(self, session_id: str) -> None:
        if session_id in self.sessions:
            raise RequestError.invalid_request(
                {"details": f"session {session_id!r} is already open here; send its prompts to it, no load needed"}
            )

    def _session(self, session_id: str) -> AcpSession:
        session = self.sessions.get(session_id)
        if session is None:
            raise RequestError.invalid_params(
                {"details": f"no session {session_id!r} here; start one with session/new or session/load"}
            )
        return session

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:  # the next prompt tries again, and says why
            log.warning("starting an agent process failed: %s", task.exception())


def broad_folder(root: Path) -> str | None:
    """What makes the resolved folder `root` too broad to be a workspace, or None."""
    if root == Path(root.anchor):
        return "the file system's root"
    try:
        home = Path.home().resolve()
    except RuntimeError:  # no home folder to protect
        return None
    return "your home folder" if root == home else None


def _has_mcp() -> bool:
    return find_spec("agent.mcp") is not None


def _version() -> str:
    try:
        return version("teachback")
    except PackageNotFoundError:
        return "0"


# -- the process ----------------------------------------------------------------------------------


def main(broad_workspaces: Sequence[Path] = ()) -> int:
    """Serve ACP on stdin/stdout until the editor closes them."""
    out = protocol_stream(buffered=False)
    log_to_stderr("teachback-acp")
    return asyncio.run(_serve(out, TeachbackAgent(broad_workspaces)))


async def _serve(out: BinaryIO, agent: TeachbackAgent) -> int:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=LINE_LIMIT)
    unusable = [name for name, stream in (("input", sys.stdin), ("output", out)) if not _watchable(stream)]
    if unusable:  # a regular file or /dev/null: the event loop cannot watch it (a traceback, then a hang)
        sys.stderr.write(
            f"teachback acp: its {' and '.join(unusable)} must be a pipe from an editor's agent panel, not a "
            "file or /dev/null. See the README's 'Agent panels' section for the editor set-up.\n"
        )
        return 2
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, out)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    try:
        # The transport checks each line before the library sees it. session/resume is stable in ACP's
        # schema but routed only as "unstable" by the Python library.
        await run_agent(agent, LineTransport(reader, writer), use_unstable_protocol=True)
    except ConnectionError as exc:  # the editor closed our output first: it is gone, so are we
        log.info("the editor closed the connection: %s", exc)
    finally:
        try:
            await agent.close()
        except WorkerStopped as exc:
            log.info("an agent process had already stopped: %s", exc)
    return 0


def _watchable(stream: Any) -> bool:
    """A pipe, a socket or a terminal: what the event loop can wait on."""
    try:
        mode = os.fstat(stream.fileno()).st_mode
    except (OSError, ValueError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(stream.fileno())
