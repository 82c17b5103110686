"""Initialization options: typed, validated one key at a time, merged over the CLI's settings.

The editor sends `initializationOptions` (`model`, `approval`, `db`, `maxSteps`, `maxCost`, and
`events` to turn the `teachback/event` stream off). Absent keys keep what `teachback.toml` and the
`TEACHBACK_*` environment say; a key that cannot be used falls back to that value, and the reason is
returned as a message for the user (the server shows it with window/showMessage).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.config import APPROVAL_MODES, ConfigError, Settings, load_settings

# initialization option key -> Settings field
SETTING_KEYS = {
    "model": "model",
    "approval": "approval",
    "db": "db",
    "maxSteps": "max_steps",
    "maxCost": "max_cost",
}
EXPECTED_TYPES: dict[str, tuple[type, ...]] = {
    "model": (str,),
    "approval": (str,),
    "db": (str,),
    "maxSteps": (int,),
    "maxCost": (int, float),
}


@dataclass(frozen=True)
class ServerOptions:
    """What the server runs with: the agent's settings plus the server's own switches."""

    settings: Settings
    events: bool = True  # send `teachback/event` notifications


@dataclass(frozen=True)
class Resolved:
    options: ServerOptions
    problems: tuple[str, ...]  # one message per option that was ignored, saying how to fix it


def resolve_options(raw: Any, workspace: Path | None) -> Resolved:
    """Merge the editor's initialization options over the configured settings."""
    problems: list[str] = []
    try:
        settings = load_settings(workspace)
    except ConfigError as exc:
        problems.append(f"{exc} Using the built-in defaults instead.")
        settings = Settings()
    if raw is None:
        return Resolved(ServerOptions(settings), tuple(problems))
    if not isinstance(raw, dict):
        problems.append(
            f'initializationOptions must be an object such as {{"model": "..."}}, got {_kind(raw)}; ignoring it.'
        )
        return Resolved(ServerOptions(settings), tuple(problems))

    known = [*SETTING_KEYS, "events"]
    unknown = sorted(set(raw) - set(known))
    if unknown:
        problems.append(
            f"initializationOptions: unknown key(s) {', '.join(unknown)} ignored; known keys: {', '.join(known)}."
        )
    for key, field_name in SETTING_KEYS.items():
        if key not in raw or raw[key] is None:
            continue
        value = raw[key]
        fallback = getattr(settings, field_name)
        if isinstance(value, bool) or not isinstance(value, EXPECTED_TYPES[key]):
            problems.append(f"initializationOptions.{key} must be {_expected(key)}, got {value!r}; using {fallback!r}.")
            continue
        try:
            settings = settings.replace(**{field_name: value})
        except ConfigError as exc:
            problems.append(f"initializationOptions.{key}: {_reason(exc)} Using {fallback!r}.")

    events = raw.get("events", True)
    if not isinstance(events, bool):
        problems.append(f"initializationOptions.events must be true or false, got {events!r}; using true.")
        events = True
    return Resolved(ServerOptions(settings, events=events), tuple(problems))


def effective_options(options: ServerOptions) -> dict[str, Any]:
    """The effective options, as the status command reports them."""
    settings = options.settings
    return {
        "model": settings.model,
        "approval": settings.approval,
        "db": str(settings.db_path()),
        "maxSteps": settings.max_steps,
        "maxCost": settings.max_cost,
        "events": options.events,
        "record": settings.record,
    }


def _expected(key: str) -> str:
    names = {
        "model": 'a litellm model string such as "anthropic/claude-sonnet-4-5"',
        "approval": "one of " + ", ".join(f'"{mode}"' for mode in APPROVAL_MODES),
        "db": "a file path",
        "maxSteps": "a whole number of at least 1",
        "maxCost": "a number of US dollars per turn",
    }
    return names[key]


def _reason(exc: ConfigError) -> str:
    # Settings.replace reports its source as "arguments"; the user wrote initializationOptions.
    return str(exc).removeprefix("arguments: ")


def _kind(value: Any) -> str:
    return {list: "a list", str: "a string", int: "a number", float: "a number", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )
