"""Settings: defaults < user `teachback.toml` < workspace `teachback.toml` < `TEACHBACK_*` env < flags.

`TEACHBACK_HOME` relocates all user state (database, caches, undo journals, and the user config
file); without it, state lives in the platform data dir and config in the platform config dir.
"""

from __future__ import annotations

import dataclasses
import math
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.paths import CONFIG_FILE, teachback_home, user_config_path

# plan: reads and searches only, edits and commands refused when they are called, and each turn ends
# with a plan for the user to approve (agent.plan_mode).
APPROVAL_MODES = ("read-only", "plan", "ask", "auto-edit", "full-auto")
# grammar: a JSON-schema response_format (OpenAI json_schema form); json_object: the same schema in the
# {"type": "json_object", "schema": ...} form that llama-cpp-python's server takes.
TOOL_MODES = ("native", "text", "grammar", "json_object")
SANDBOX_MODES = ("none", "auto", "bwrap", "sandbox-exec")  # run_command confinement: agent/sandbox.py
EMBEDDED_MODEL = "local/smollm2"
# Tokens in a reply of the embedded model when max_tokens is unset, and in the replies eval and state
# replay sample: a tool call needs a few dozen, and a small model that loses its way can ramble (or
# repeat one sentence) until a much larger cap.
REPLY_TOKENS = 256
SERVERS_TABLE = "mcp_servers"  # [mcp_servers.NAME] in a config file: read by agent.mcp.config
HOOKS_TABLE = "hooks"  # [[hooks.EVENT]] in a config file: read by agent.hooks.config


class ConfigError(Exception):
    """A setting that cannot be used; the message says where it came from and how to fix it."""


def _number(default: float | None, *, low: float = 0, high: float | None = None, above: bool = False) -> Any:
    """A numeric setting and its range. Every number setting must be finite; one declared without
    this is only checked to be >= 0."""
    return dataclasses.field(default=default, metadata={"low": low, "high": high, "above": above})


def _choice(default: str, choices: tuple[str, ...]) -> Any:
    return dataclasses.field(default=default, metadata={"choices": choices})


@dataclass(frozen=True)
class Settings:
    model: str = EMBEDDED_MODEL
    approval: str = _choice("ask", APPROVAL_MODES)
    db: str | None = None  # None: $TEACHBACK_HOME/feedback.db
    db_wait: float = _number(30.0)  # seconds a write keeps retrying while another process holds the database
    max_steps: int = _number(30, low=1)
    max_cost: float = _number(1.0)  # USD per turn; 0: no cap
    max_time: float = _number(600.0, above=True)  # seconds per turn
    tool_mode: str = _choice("auto", ("auto", *TOOL_MODES))
    api_base: str | None = None
    # The model's context window in tokens, for the context fill an agent panel shows (ACP usage_update);
    # 0: litellm's figure for the model, or the context the embedded model loads (8192 for local/...).
    context_size: int = _number(0)
    max_tokens: int | None = _number(None, low=1)  # per model reply; None: the provider's default
    temperature: float | None = _number(None, high=2)  # None: the provider's default
    # The sampling seed sent with each request (None: none is sent). The embedded model mixes it with
    # the prompt's tokens, so one seed gives one reply per prompt and each step of a session its own draw.
    seed: int | None = _number(None)
    record: bool = True
    command_timeout: float = _number(120.0, above=True)
    sandbox: str = _choice("none", SANDBOX_MODES)  # "auto": bwrap on Linux, sandbox-exec on macOS
    allow_commands: tuple[str, ...] = ()  # glob rules on the command line; deny wins over allow
    deny_commands: tuple[str, ...] = ()
    ask_commands: tuple[str, ...] = ()
    # Tools from MCP servers ([mcp_servers.NAME] tables, agent/mcp): glob rules on the tool's name
    # (mcp__<server>__<tool>, e.g. "mcp__github__*"); deny wins over ask, ask over allow. Unmatched
    # MCP tools are asked about in ask and auto-edit, refused in read-only, run in full-auto.
    allow_tools: tuple[str, ...] = ()
    deny_tools: tuple[str, ...] = ()
    ask_tools: tuple[str, ...] = ()
    mcp_startup_timeout: float = _number(30.0, above=True)  # seconds for a server to start and list its tools
    mcp_call_timeout: float = _number(120.0, above=True)  # seconds for one MCP tool call
    repo_map_tokens: int = _number(1024)
    # Project instructions (AGENTS.md, CLAUDE.md: agent/instructions.py): bytes a session shows in all
    # (each file at most 32 KiB); 0 reads none.
    instructions_bytes: int = _number(64 * 1024)
    # Lessons from recorded failures and their fixes (feedback_store/lessons/lessons.py): a block of at most
    # lessons_tokens in the system prompt, and a few lessons after a failing tool call. lessons_scope:
    # this workspace's only, the user's whole store, or that and the team stores named in lessons_db.
    lessons: bool = True
    lessons_tokens: int = _number(150)
    lessons_scope: str = _choice("team", ("workspace", "user", "team"))
    lessons_db: tuple[str, ...] = ()
    # A workspace's teachback.toml may share the sessions recorded there with the team, once the
    # user allowed that workspace (`teachback share --workspace`; feedback_store/team/sharing.py).
    share: bool = False
    # Where the language server runs a turn: "worker" (a child process at lower priority, so the
    # editor never waits on the agent) or "inline" (in the server's own process).
    turn_process: str = _choice("worker", ("worker", "inline"))
    # The LoRA adapter the embedded model (local/...) serves: "promoted" (the one `teachback learn`
    # promoted last for that model, if any; used from the next model call on), "none", or a GGUF
    # LoRA file or adapter directory. A model string local/<model>@<adapter> overrides it.
    adapter: str = "promoted"
    # Threads the embedded model computes with; 0: the CPUs this process may use, at most 8. Parallel
    # task attempts divide the CPUs between them unless this is set.
    local_threads: int = _number(0)
    # Folders accepted as an editor's workspace although they are the file system's root or the home
    # folder itself, which `teachback acp` otherwise refuses as a session's folder. Only the user's config
    # and the environment count: a workspace's own teachback.toml cannot widen itself.
    broad_workspaces: tuple[str, ...] = ()
    # Sessions sent live as OpenTelemetry GenAI spans to this OTLP/HTTP base URL (as
    # OTEL_EXPORTER_OTLP_ENDPOINT gives one, e.g. http://localhost:4318); None: not sent. The other
    # OTEL_EXPORTER_OTLP_* variables (headers, compression, timeout) apply. Messages, arguments and
    # results go with the spans only when otlp_content is on (redacted as in exports).
    otlp_endpoint: str | None = None
    otlp_content: bool = False

    def db_path(self) -> Path:
        return Path(self.db).expanduser() if self.db else teachback_home() / "feedback.db"

    def replace(self, **changes: Any) -> Settings:
        """A copy with `changes` applied (None values ignored), validated."""
        known = {f.name: f for f in dataclasses.fields(Settings)}
        given = {k: _coerce(known[k], v, "arguments") for k, v in changes.items() if v is not None}
        return _validated(dataclasses.replace(self, **given), "arguments")


def load_settings(workspace: Path | None = None, env: dict[str, str] | None = None) -> Settings:
    """Settings for `workspace` from the config files and the environment."""
    env = dict(os.environ if env is None else env)
    settings = Settings()
    sources = [user_config_path()]
    if workspace is not None:
        sources.append(Path(workspace) / CONFIG_FILE)
    for path in sources:
        if path.is_file():
            settings = _merge(settings, _read_toml(path), str(path))
    for f in dataclasses.fields(Settings):
        variable = f"TEACHBACK_{f.name.upper()}"
        if env.get(variable) is not None:
            settings = _merge(settings, {f.name: _from_env_text(f, env[variable])}, f"environment ({variable})")
    return settings


def config_sources(workspace: Path | None = None, env: dict[str, str] | None = None) -> list[str]:
    """What load_settings reads, in the order it applies them: the config files that exist, then each
    TEACHBACK_<SETTING> variable that is set (later ones win)."""
    env = dict(os.environ if env is None else env)
    files = [user_config_path()] + ([Path(workspace) / CONFIG_FILE] if workspace is not None else [])
    variables = [f"TEACHBACK_{f.name.upper()}" for f in dataclasses.fields(Settings)]
    return [str(p) for p in files if p.is_file()] + [v for v in variables if env.get(v) is not None]


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}. Fix the file or move it aside.") from exc
    except OSError as exc:
        raise ConfigError(f"Cannot read {path}: {exc.strerror}. Fix its permissions or move it aside.") from exc
    # Accept both top-level keys and a [teachback] table; dashes or underscores.
    data = data.get("teachback", data)
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: 'teachback' must be a table (a [teachback] header with the settings under it), got {data!r}."
        )
    # MCP servers and hooks are tables of their own, read by agent.mcp.config and agent.hooks.config.
    return {k.replace("-", "_"): v for k, v in data.items() if k.replace("-", "_") not in (SERVERS_TABLE, HOOKS_TABLE)}


def _merge(settings: Settings, values: dict[str, Any], source: str) -> Settings:
    known = {f.name: f for f in dataclasses.fields(Settings)}
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ConfigError(f"{source}: unknown setting(s) {', '.join(unknown)}. Known settings: {', '.join(known)}.")
    coerced = {}
    for name, value in values.items():
        coerced[name] = _coerce(known[name], value, source)
    return _validated(dataclasses.replace(settings, **coerced), source)


def _coerce(f: dataclasses.Field, value: Any, source: str) -> Any:
    kind = _kind(f)
    try:
        if kind == "int":
            if isinstance(value, bool) or float(value) != int(float(value)):
                raise ValueError
            return int(float(value))  # OverflowError for inf
        if kind == "float":
            if isinstance(value, bool):
                raise ValueError
            return float(value)
        if kind == "bool":
            if not isinstance(value, bool):
                raise ValueError
            return value
        if kind.startswith("tuple"):
            if isinstance(value, str) or not all(isinstance(v, str) for v in value):
                raise ValueError
            return tuple(value)
        if not isinstance(value, str):
            raise ValueError
        return value
    except (TypeError, ValueError, OverflowError):
        wanted = {"int": "int (a whole number)", "tuple[str, ...]": "a list of strings"}.get(kind, kind)
        raise ConfigError(f"{source}: setting {f.name!r} must be {wanted}, got {value!r}.") from None


def _kind(f: dataclasses.Field) -> str:
    """The field's type name without an optional `| None` (None is simply left unset)."""
    return str(f.type).removesuffix(" | None")


def _from_env_text(f: dataclasses.Field, raw: str) -> Any:
    kind = _kind(f)
    if kind == "bool":
        lowered = raw.strip().lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"TEACHBACK_{f.name.upper()} must be true or false, got {raw!r}.")
    if kind.startswith("tuple"):
        return tuple(part.strip() for part in raw.split(",") if part.strip())
    if kind in ("int", "float"):
        try:
            return float(raw) if kind == "float" else int(raw)
        except ValueError:
            raise ConfigError(f"TEACHBACK_{f.name.upper()} must be a number, got {raw!r}.") from None
    return raw


def _validated(settings: Settings, source: str) -> Settings:
    """Every setting against its declared type, choices and range (numbers must be finite)."""
    for f in dataclasses.fields(Settings):
        problem = _problem(f, getattr(settings, f.name))
        if problem:
            raise ConfigError(f"{source}: {f.name} {problem}")
    if not settings.model.strip():
        raise ConfigError(f"{source}: model must not be empty (e.g. anthropic/claude-sonnet-4-5).")
    problem = otlp_endpoint_problem(settings.otlp_endpoint) if settings.otlp_endpoint else None
    if problem:
        raise ConfigError(f"{source}: otlp_endpoint {problem}")
    return settings


def otlp_endpoint_problem(url: str) -> str | None:
    """What is wrong with an OTLP/HTTP base URL (the setting, or `teachback export --otlp`), or None."""
    if not url.startswith(("http://", "https://")):
        return f"must be an http:// or https:// base URL (e.g. http://localhost:4318), got {url!r}."
    if url.rstrip("/").endswith(("/v1/traces", "/v1/logs")):
        base = url.rstrip("/").rsplit("/v1/", 1)[0]
        return f"is a base URL, as in OTEL_EXPORTER_OTLP_ENDPOINT: spans go to it + /v1/traces. Give {base!r}."
    return None


def _problem(f: dataclasses.Field, value: Any) -> str | None:
    if value is None:
        return None
    choices = f.metadata.get("choices")
    if choices and value not in choices:
        return f"must be one of {', '.join(choices)}, got {value!r}."
    if _kind(f) not in ("int", "float"):
        return None
    if not math.isfinite(value):
        return f"must be a finite number, got {value!r}."
    low, high = f.metadata.get("low", 0), f.metadata.get("high")
    if f.metadata.get("above") and value <= low:
        return f"must be above {low:g}, got {value!r}."
    if high is not None and not low <= value <= high:
        return f"must be between {low:g} and {high:g}, got {value!r}."
    if value < low:
        return f"must be at least {low:g}, got {value!r}."
    return None


def settings_dict(settings: Settings) -> dict[str, Any]:
    """Settings as plain JSON data (recorded with each session)."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(settings).items()}


def config_table(path: Path, name: str) -> Any:
    """The `name` table of a teachback.toml (top level or under [teachback]), or None. The file's
    settings were already read, and refused with a clear error if it is not TOML."""
    if not path.is_file():
        return None
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    nested = data.get("teachback")
    return data.get(name, nested.get(name) if isinstance(nested, dict) else None)
