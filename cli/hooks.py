"""`teachback hooks install|uninstall|status claude-code|codex`: teachback's capture command in
another agent's own hooks settings, so its sessions are recorded as they happen (cli.capture).

Both agents read the same shape, `{"hooks": {EVENT: [{"matcher"?, "hooks": [{"type": "command",
"command", "timeout"}]}]}}`: Claude Code in `.claude/settings.json` (or `~/.claude/settings.json`,
`$CLAUDE_CONFIG_DIR`), Codex in `.codex/hooks.json` (or `~/.codex/hooks.json`, `$CODEX_HOME`). Every
hook the user has is kept; ours is one group of its own per event, found again by its command line
(the teachback executable, `capture`, the agent's name). A file that is not a JSON object (or whose
`hooks` is not one) is left untouched, with an error that says so.

`install` keeps a copy of the file as it found it (under $TEACHBACK_HOME/hooks), so `uninstall`
gives the file back byte for byte when nothing else in it changed since; otherwise it removes only
our groups and writes the rest in the file's own indentation.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

from agent.config import teachback_home
from cli.options import EXIT_OK, EXIT_USAGE

EVENTS = {
    "claude-code": (
        "UserPromptSubmit",
        "PreToolUse",
        "PermissionRequest",
        "PostToolUse",
        "PostToolUseFailure",
        "PermissionDenied",
        "Stop",
        "SessionEnd",
    ),
    "codex": ("UserPromptSubmit", "PreToolUse", "PermissionRequest", "PostToolUse", "Stop"),
}
TIMEOUT_S = 10  # the host's limit for one call; capture returns in milliseconds


class SettingsError(Exception):
    """A settings file teachback will not change."""


def add_hooks_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("install", "uninstall", "status"))
    parser.add_argument("agent", nargs="?", choices=tuple(EVENTS), help="the agent (status: both when left out)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--project", action="store_true", help="this folder's settings (the default)")
    where.add_argument("--user", action="store_true", help="your own settings, for every project")
    parser.add_argument(
        "--guard", action="store_true", help="install: deny calls this repository's lessons know to fail"
    )


def hooks_main(args: argparse.Namespace) -> int:
    if args.action == "status":
        for agent in [args.agent] if args.agent else list(EVENTS):
            for scope in ("project", "user"):
                print(describe(agent, settings_path(agent, scope == "user")))
        return EXIT_OK
    if args.agent is None:
        print(f"teachback hooks {args.action}: name the agent: claude-code or codex.", file=sys.stderr)
        return EXIT_USAGE
    path = settings_path(args.agent, args.user)
    try:
        if args.action == "install":
            install(path, args.agent, capture_command(args.agent, args.guard))
            print(f"Installed teachback's hooks{' (guarding)' if args.guard else ''} in {path}.")
            if args.agent == "codex":  # Codex skips a new or changed hook until the user trusts it
                print("Codex runs them once you trust them: open /hooks in Codex to review them.")
        else:
            removed = uninstall(path, args.agent)
            print(f"Removed {removed} teachback hook(s) from {path}." if removed else f"No teachback hook in {path}.")
    except SettingsError as exc:
        print(f"teachback hooks {args.action}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


def settings_path(agent: str, user: bool) -> Path:
    if agent == "claude-code":
        folder = (
            Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude") if user else Path.cwd() / ".claude"
        )
        return folder.expanduser().absolute() / "settings.json"
    folder = Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex") if user else Path.cwd() / ".codex"
    return folder.expanduser().absolute() / "hooks.json"


def capture_command(agent: str, guard: bool) -> str:
    """The teachback executable by its absolute path (the host's PATH may not have it), `capture`,
    and the agent's name."""
    found = Path(sys.argv[0]) if Path(sys.argv[0]).name.startswith("teachback") else None
    exe = str(found.absolute()) if found and found.is_file() else shutil.which("teachback")
    words = [exe] if exe else [sys.executable, "-P", "-m", "cli"]
    return shlex.join([*words, "capture", agent, *(["--guard"] if guard else [])])


def is_ours(handler: Any, agent: str) -> bool:
    if not isinstance(handler, dict) or not isinstance(handler.get("command"), str):
        return False
    try:
        words = shlex.split(handler["command"])
    except ValueError:
        return False
    tail = words[-3:] if words[-1:] == ["--guard"] else words[-2:]
    head = " ".join(words[: len(words) - len(tail)])
    return tail[:2] == ["capture", agent] and ("teachback" in head or head.endswith("-m cli"))


# -- the file ---------------------------------------------------------------------------------------


def read_settings(path: Path) -> tuple[str | None, dict[str, Any]]:
    """The file's text (None when there is none) and its object."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, {}
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"cannot read {path} ({exc}); it was left untouched.") from exc
    try:
        value = json.loads(text) if text.strip() else {}
    except (ValueError, RecursionError) as exc:
        raise SettingsError(
            f"{path} is not valid JSON ({exc}); it was left untouched. Fix it (or move it aside) and run this again."
        ) from exc
    if not isinstance(value, dict) or not isinstance(value.get("hooks", {}), dict):
        raise SettingsError(
            f'{path} is not a settings object with a "hooks" object in it; it was left untouched. '
            "Fix it (or move it aside) and run this again."
        )
    for event, groups in value.get("hooks", {}).items():
        if not isinstance(groups, list):
            raise SettingsError(f'{path}: hooks "{event}" is not a list; the file was left untouched.')
    return text, value


def without_ours(settings: dict[str, Any], agent: str) -> tuple[dict[str, Any], int]:
    """A copy with our hooks taken out (and what only they filled), and how many there were."""
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        return settings, 0
    removed, kept_hooks = 0, {}
    for event, groups in hooks.items():
        kept_groups = []
        for group in groups:
            handlers = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(handlers, list) or not any(is_ours(h, agent) for h in handlers):
                kept_groups.append(group)
                continue
            others = [h for h in handlers if not is_ours(h, agent)]
            removed += len(handlers) - len(others)
            if others:
                kept_groups.append({**group, "hooks": others})
        if kept_groups or not groups:
            kept_hooks[event] = kept_groups
    result = dict(settings)
    if kept_hooks or not hooks or removed == 0:
        result["hooks"] = kept_hooks
    else:
        del result["hooks"]
    return result, removed


def install(path: Path, agent: str, command: str) -> None:
    text, settings = read_settings(path)
    base, _ = without_ours(settings, agent)
    merged = dict(base)
    hooks = dict(merged.get("hooks", {}))
    for event in EVENTS[agent]:
        hooks[event] = [
            *hooks.get(event, []),
            {"hooks": [{"type": "command", "command": command, "timeout": TIMEOUT_S}]},
        ]
    merged["hooks"] = hooks
    written = _dump(merged, text)
    _remember(path, text, written)
    _write(path, written)


def uninstall(path: Path, agent: str) -> int:
    text, settings = read_settings(path)
    remaining, removed = without_ours(settings, agent)
    if removed == 0:
        return 0
    before = _recalled(path)
    if before is not None and (before["before"] is None and remaining in ({}, {"hooks": {}})):
        path.unlink()
    elif before is not None and before["before"] is not None and remaining == _parsed(before["before"]):
        _write(path, before["before"])
    else:
        _write(path, _dump(remaining, text))
    return removed


def describe(agent: str, path: Path) -> str:
    try:
        _, settings = read_settings(path)
    except SettingsError as exc:
        return f"{agent}: {exc}"
    ours = [
        (event, handler["command"])
        for event, groups in settings.get("hooks", {}).items()
        for group in groups
        if isinstance(group, dict) and isinstance(group.get("hooks"), list)
        for handler in group["hooks"]
        if is_ours(handler, agent)
    ]
    if not ours:
        return f"{agent}: not installed in {path}"
    guarding = " (guarding)" if any(command.endswith("--guard") for _, command in ours) else ""
    return f"{agent}: installed{guarding} in {path} for {', '.join(sorted({event for event, _ in ours}))}"


def _dump(value: dict[str, Any], original: str | None) -> str:
    indent = 2
    if original:
        line = next((ln for ln in original.splitlines()[1:] if ln.strip()), "")
        indent = len(line) - len(line.lstrip(" ")) or 2
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    return text + "\n" if original is None or original.endswith("\n") else text


def _parsed(text: str) -> Any:
    try:
        return json.loads(text) if text.strip() else {}
    except (ValueError, RecursionError):
        return None


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.teachback.tmp")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


def _memory(path: Path) -> Path:
    return teachback_home() / "hooks" / (hashlib.sha256(str(path).encode()).hexdigest()[:24] + ".json")


def _remember(path: Path, before: str | None, after: str) -> None:
    """The file as install found it, unless an earlier install already kept the user's own."""
    memory = _memory(path)
    kept = _recalled(path)
    original = kept["before"] if kept is not None and kept.get("after") == before else before
    memory.parent.mkdir(parents=True, exist_ok=True)
    memory.write_text(json.dumps({"path": str(path), "before": original, "after": after}), encoding="utf-8")


def _recalled(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(_memory(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) and value.get("path") == str(path) else None
