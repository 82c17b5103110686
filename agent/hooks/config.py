"""Which hooks a session runs: `[[hooks.EVENT]]` tables in the user's and the workspace's
teachback.toml, and the `hooks` object of a workspace's `.claude/settings.json` (Claude Code's own
format; a teachback.toml uses the same keys: `matcher`, and `hooks` entries of `type`, `command`,
`timeout`).

A workspace's own hooks (its teachback.toml tables and its .claude/settings.json) run only once the
user has allowed them (`teachback mcp allow`, the rule MCP servers follow, agent.mcp.trust): a cloned
repository must not be able to run programs on its own. The user's own hooks run everywhere.

Matchers name teachback's tools (`edit_file`, `run_command`, `mcp__server__tool`); in
.claude/settings.json they also match by Claude Code's names, through CLAUDE_TOOLS. Hooks there that
run `teachback capture` (teachback recording Claude Code itself) are skipped: they are not meant for
teachback's own calls. An entry that cannot be used is kept with its problem, for `teachback
doctor`, and never runs.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.config import CONFIG_FILE, HOOKS_TABLE, config_table, user_config_path
from agent.mcp import trust
from agent.mcp.config import fingerprint

EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PermissionRequest",
    "PostToolUse",
    "PostToolUseFailure",
    "Stop",
)
TOOL_EVENTS = frozenset({"PreToolUse", "PermissionRequest", "PostToolUse", "PostToolUseFailure"})
CLAUDE_SETTINGS = ".claude/settings.json"
DEFAULT_TIMEOUT = 60.0  # seconds, as in Claude Code
MAX_TIMEOUT = 600.0
# Claude Code's tool names and the teachback tools each stands for. A matcher in .claude/settings.json
# matches a teachback tool by its own name or by any of these; the tool's input is teachback's.
CLAUDE_TOOLS = {
    "Bash": ("run_command",),
    "Edit": ("edit_file",),
    "MultiEdit": ("edit_file",),
    "Write": ("create_file",),
    "Read": ("read_file",),
    "Glob": ("list_files",),
    "LS": ("list_files",),
    "Grep": ("search",),
}
CLAUDE_NAMES = {
    ours: tuple(claude for claude, mine in CLAUDE_TOOLS.items() if ours in mine)
    for ours in {name for names in CLAUDE_TOOLS.values() for name in names}
}
# A matcher of plain names (`Bash`, `Edit|Write`) matches them exactly; anything else is a regex.
PLAIN = re.compile(r"^[A-Za-z0-9_|]+$")
CAPTURE = re.compile(r"\bteachback\b[^;&|]*\bcapture\b")


@dataclass(frozen=True)
class HookConfig:
    """One command hook. `problem` set: the entry cannot be used, and says why and how to fix it."""

    event: str
    command: str
    source: str  # the file that defined it
    matcher: str = ""  # "" or "*": every tool (or every session start)
    timeout: float = DEFAULT_TIMEOUT
    claude_names: bool = False  # from .claude/settings.json: Claude Code's tool names match too
    problem: str | None = None

    def matches(self, subject: str | None) -> bool:
        """Whether this hook runs for `subject`: the tool of a tool event, the source of a session
        start (startup, resume); other events have no subject and run every hook."""
        if self.matcher in ("", "*") or subject is None:
            return True
        names = (subject, *CLAUDE_NAMES.get(subject, ())) if self.claude_names else (subject,)
        if PLAIN.match(self.matcher):
            return any(name in self.matcher.split("|") for name in names)
        return any(re.search(self.matcher, name) for name in names)

    def describe(self) -> str:
        where = f" {self.matcher}" if self.matcher not in ("", "*") else ""
        return f"{self.event}{where}: {self.command}"


@dataclass(frozen=True)
class HookSet:
    """The hooks a session runs, the entries that cannot be used, those skipped, and the workspace's
    own hooks when they do not run because they are not allowed (`withheld`)."""

    hooks: tuple[HookConfig, ...] = ()
    broken: tuple[HookConfig, ...] = ()
    skipped: tuple[HookConfig, ...] = ()
    withheld: tuple[HookConfig, ...] = ()
    changed: bool = False  # the workspace's hooks were allowed before, with other definitions

    def notice(self, root: Path) -> str | None:
        """What the user is told at the session's start about hooks that do not run, if any."""
        if not self.withheld:
            return None
        files = " and ".join(sorted({h.source for h in self.withheld}))
        why = "they changed since you allowed them" if self.changed else "a cloned repository must not run programs"
        return (
            f"This workspace defines {len(self.withheld)} hook(s) in {files} that do not run: {why}. If you trust "
            f"them, run `teachback mcp allow --workspace {root}` (`teachback doctor` lists what they run)."
        )


def load_hooks(workspace: Path) -> HookSet:
    """The hooks a session on `workspace` runs: the user's, then the workspace's if allowed."""
    root = Path(workspace).resolve()
    user = _from_toml(user_config_path())
    own = workspace_hooks(root)
    definitions = workspace_definitions(root)
    allowed = trust.allowed(root, "hooks")
    trusted = not definitions or allowed == fingerprint(definitions)
    everything = [*user, *own] if trusted else user
    usable = [h for h in everything if h.problem is None]
    return HookSet(
        hooks=tuple(h for h in usable if not CAPTURE.search(h.command)),
        broken=tuple(h for h in everything if h.problem is not None),
        skipped=tuple(h for h in [*user, *own] if h.problem is None and CAPTURE.search(h.command)),
        withheld=() if trusted else tuple(h for h in own if h.problem is None and not CAPTURE.search(h.command)),
        changed=not trusted and allowed is not None,
    )


def workspace_hooks(root: Path) -> list[HookConfig]:
    """The hooks the workspace itself defines (its .claude/settings.json, then its teachback.toml)."""
    return _from_claude(root / CLAUDE_SETTINGS) + _from_toml(root / CONFIG_FILE)


def workspace_definitions(root: Path) -> dict[str, Any]:
    """The workspace's own hook definitions, by file, as read (what allowing them covers)."""
    own: dict[str, Any] = {}
    claude = _claude_hooks(root / CLAUDE_SETTINGS)
    if claude is not None:
        own[CLAUDE_SETTINGS] = claude
    table = config_table(root / CONFIG_FILE, HOOKS_TABLE)
    if table:
        own[CONFIG_FILE] = table
    return own


def _claude_hooks(path: Path) -> Any:
    """The `hooks` of a .claude/settings.json; the text itself when it is not a JSON object."""
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        return f"(unreadable: {exc})"
    return data.get("hooks") if isinstance(data, dict) else f"(not a JSON object: {type(data).__name__})"


def _from_toml(path: Path) -> list[HookConfig]:
    table = config_table(path, HOOKS_TABLE)
    return [] if table is None else _entries(table, str(path), claude=False)


def _from_claude(path: Path) -> list[HookConfig]:
    found = _claude_hooks(path)
    if isinstance(found, str):
        return [_broken("hooks", str(path), f"the file cannot be read as JSON {found}; fix it")]
    return [] if found is None else _entries(found, str(path), claude=True)


def _entries(table: Any, source: str, *, claude: bool) -> list[HookConfig]:
    """Every command hook of a `hooks` table: {EVENT: [{matcher, hooks: [{type, command, timeout}]}]}."""
    if not isinstance(table, dict):
        return [_broken("hooks", source, "hooks must be a table of events, each a list of matcher groups")]
    found: list[HookConfig] = []
    for event, groups in table.items():
        if event not in EVENTS:
            found.append(_broken(str(event), source, f"teachback runs no {event!r} event; it runs {', '.join(EVENTS)}"))
            continue
        if not isinstance(groups, list):
            found.append(_broken(event, source, f"{event} must be a list of groups ([[hooks.{event}]] tables)"))
            continue
        for group in groups:
            found.extend(_group(event, group, source, claude))
    return found


def _group(event: str, group: Any, source: str, claude: bool) -> list[HookConfig]:
    if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
        return [_broken(event, source, 'each group needs a "hooks" list of {type, command, timeout} entries')]
    matcher = group.get("matcher", "")
    if not isinstance(matcher, str):
        return [_broken(event, source, f"matcher must be a string, got {matcher!r}")]
    if not PLAIN.match(matcher) and matcher not in ("", "*"):
        try:
            re.compile(matcher)
        except re.error as exc:
            return [_broken(event, source, f"matcher {matcher!r} is not a valid regular expression ({exc})")]
    return [_hook(event, matcher, entry, source, claude) for entry in group["hooks"]]


def _hook(event: str, matcher: str, entry: Any, source: str, claude: bool) -> HookConfig:
    if not isinstance(entry, dict):
        return _broken(event, source, "each hook must be a table with type, command and timeout")
    command, kind, timeout = entry.get("command"), entry.get("type", "command"), entry.get("timeout", DEFAULT_TIMEOUT)
    if kind != "command":
        return _broken(event, source, f'only "command" hooks run in teachback, not type {kind!r}', command)
    if not isinstance(command, str) or not command.strip():
        return _broken(event, source, f"command must be a non-empty string, got {command!r}")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= MAX_TIMEOUT:
        return _broken(
            event, source, f"timeout must be seconds above 0, at most {MAX_TIMEOUT:g}; got {timeout!r}", command
        )
    return HookConfig(event, command, source, matcher, float(timeout), claude)


def _broken(event: str, source: str, problem: str, command: Any = None) -> HookConfig:
    shown = command if isinstance(command, str) else ""
    return HookConfig(event, shown, source, problem=f"this hook cannot be used: {problem}")


def hook_checks(workspace: Path) -> list[tuple[str, bool, str]]:
    """`teachback doctor`'s lines about hooks (name, ok, detail): each hook, where it comes from,
    and whether it runs; an entry that cannot be used fails."""
    found = load_hooks(workspace)
    if not (found.hooks or found.withheld or found.skipped or found.broken):
        return [("hooks", True, "none configured")]
    checks = [(f"hook {h.describe()}", True, f"runs [{h.source}]") for h in found.hooks]
    checks += [(f"hook {h.describe()}", True, f"not allowed yet [{h.source}]") for h in found.withheld]
    checks += [
        (f"hook {h.describe()}", True, f"skipped: it runs teachback capture [{h.source}]") for h in found.skipped
    ]
    checks += [(f"hook {h.describe()}", False, f"{h.problem} [{h.source}]") for h in found.broken]
    if found.withheld:
        checks.append(("hooks of this workspace", True, found.notice(Path(workspace).resolve()) or ""))
    return checks
