"""Settings: defaults < user `teachback.toml` < workspace `teachback.toml` < `TEACHBACK_*` env < flags.

`TEACHBACK_HOME` relocates all user state (database, caches, undo journals, and the user config
file); without it, state lives in the platform data dir and config in the platform config dir.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

APPROVAL_MODES = ("read-only", "ask", "auto-edit", "full-auto")
TOOL_MODES = ("native", "text", "grammar")
SANDBOX_MODES = ("none", "auto", "bwrap", "sandbox-exec")  # run_command confinement: agent/sandbox.py
EMBEDDED_MODEL = "local/smollm2"
CONFIG_FILE = "teachback.toml"


class ConfigError(Exception):
    """A setting that cannot be used; the message says where it came from and how to fix it."""


@dataclass(frozen=True)
class Settings:
    model: str = EMBEDDED_MODEL
    approval: str = "ask"
    db: str | None = None  # None: $TEACHBACK_HOME/feedback.db
    max_steps: int = 30
    max_cost: float = 1.0  # USD per turn
    max_time: float = 600.0  # seconds per turn
    tool_mode: str = "auto"  # auto | native | text | grammar
    api_base: str | None = None
    max_tokens: int | None = None  # per model reply; None: the provider's default
    temperature: float | None = None  # None: the provider's default
    record: bool = True
    command_timeout: float = 120.0
    sandbox: str = "none"  # "auto": bwrap on Linux, sandbox-exec on macOS
    allow_commands: tuple[str, ...] = ()  # glob rules on the command line; deny wins over allow
    deny_commands: tuple[str, ...] = ()
    ask_commands: tuple[str, ...] = ()
    repo_map_tokens: int = 1024

    def db_path(self) -> Path:
        return Path(self.db).expanduser() if self.db else teachback_home() / "feedback.db"

    def replace(self, **changes: Any) -> Settings:
        """A copy with `changes` applied (None values ignored), validated."""
        given = {k: v for k, v in changes.items() if v is not None}
        return _validated(dataclasses.replace(self, **given), "arguments")


def teachback_home() -> Path:
    env = os.environ.get("TEACHBACK_HOME")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "teachback"


def user_config_path() -> Path:
    if os.environ.get("TEACHBACK_HOME"):
        return teachback_home() / CONFIG_FILE
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "teachback" / CONFIG_FILE


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
    from_env = {}
    for f in dataclasses.fields(Settings):
        raw = env.get(f"TEACHBACK_{f.name.upper()}")
        if raw is not None:
            from_env[f.name] = _from_env_text(f, raw)
    return _merge(settings, from_env, "environment (TEACHBACK_*)")


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}. Fix the file or move it aside.") from exc
    # Accept both top-level keys and a [teachback] table; dashes or underscores.
    data = data.get("teachback", data)
    return {k.replace("-", "_"): v for k, v in data.items()}


def _merge(settings: Settings, values: dict[str, Any], source: str) -> Settings:
    known = {f.name: f for f in dataclasses.fields(Settings)}
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ConfigError(
            f"{source}: unknown setting(s) {', '.join(unknown)}. Known settings: {', '.join(known)}."
        )
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
            return int(float(value))
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
    except (TypeError, ValueError):
        raise ConfigError(
            f"{source}: setting {f.name!r} must be {kind.replace('tuple[str, ...]', 'a list of strings')}, "
            f"got {value!r}."
        ) from None


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
    if settings.approval not in APPROVAL_MODES:
        raise ConfigError(
            f"{source}: approval must be one of {', '.join(APPROVAL_MODES)}, got {settings.approval!r}."
        )
    if settings.tool_mode not in ("auto", *TOOL_MODES):
        raise ConfigError(
            f"{source}: tool_mode must be auto, {', '.join(TOOL_MODES)}; got {settings.tool_mode!r}."
        )
    if settings.sandbox not in SANDBOX_MODES:
        raise ConfigError(f"{source}: sandbox must be one of {', '.join(SANDBOX_MODES)}, got {settings.sandbox!r}.")
    if settings.max_steps < 1:
        raise ConfigError(f"{source}: max_steps must be at least 1, got {settings.max_steps}.")
    if settings.max_cost < 0 or settings.max_time <= 0:
        raise ConfigError(f"{source}: max_cost must be >= 0 and max_time > 0.")
    if settings.max_tokens is not None and settings.max_tokens < 1:
        raise ConfigError(f"{source}: max_tokens must be at least 1 (or unset), got {settings.max_tokens}.")
    if settings.temperature is not None and not 0 <= settings.temperature <= 2:
        raise ConfigError(f"{source}: temperature must be between 0 and 2, got {settings.temperature}.")
    if not settings.model.strip():
        raise ConfigError(f"{source}: model must not be empty (e.g. anthropic/claude-sonnet-4-5).")
    return settings


def settings_dict(settings: Settings) -> dict[str, Any]:
    """Settings as plain JSON data (recorded with each session)."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(settings).items()}

