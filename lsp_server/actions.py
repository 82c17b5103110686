"""Code actions: the agent's entry points in context, each a `teachback.ask` command.

Titles, kinds and the instructions they send live in `actions.toml`. A "fix" action is offered
per diagnostic in the code action context, and the diagnostics go into the instruction.
"""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources

from lsprotocol import types

from common.text import clip
from lsp_server.commands import ASK, line_span

TITLE_LIMIT = 60


@dataclass(frozen=True)
class ActionTemplate:
    name: str
    title: str
    kind: str
    instruction: str


@functools.cache
def templates() -> dict[str, ActionTemplate]:
    data = tomllib.loads(resources.files("lsp_server").joinpath("actions.toml").read_text(encoding="utf-8"))
    return {name: ActionTemplate(name=name, **fields) for name, fields in data.items()}


def location(label: str, text_range: types.Range | None) -> str:
    """How an instruction names the code: `app.py line 3` / `app.py lines 3-5` (1-based)."""
    if text_range is None:
        return label
    first, last = line_span(text_range)
    return f"{label} line {first}" if last <= first else f"{label} lines {first}-{last}"


def render_diagnostic(diagnostic: types.Diagnostic) -> str:
    severity = diagnostic.severity.name.lower() if diagnostic.severity else "problem"
    origin = " ".join(str(part) for part in (diagnostic.source, diagnostic.code) if part not in (None, ""))
    suffix = f" [{origin}]" if origin else ""
    return f"line {diagnostic.range.start.line + 1}: {severity}: {diagnostic.message}{suffix}"


def code_actions(
    uri: str,
    label: str,
    text_range: types.Range,
    diagnostics: Sequence[types.Diagnostic],
    only: Sequence[str] | None = None,
) -> list[types.CodeAction]:
    """The actions for `text_range` of the document `uri` (named `label` in instructions)."""
    actions = [_fix(uri, label, d) for d in diagnostics]
    selected = text_range.start != text_range.end
    wanted = ["explain", "implement", "tests"] if selected else ["explain", "tests"]
    for name in wanted:
        template = templates()[name]
        target = text_range if selected else None
        instruction = template.instruction.format(location=location(label, target), diagnostics="")
        actions.append(_action(template, template.title, uri, target, instruction))
    return [a for a in actions if _allowed(a.kind, only)]


def _fix(uri: str, label: str, diagnostic: types.Diagnostic) -> types.CodeAction:
    template = templates()["fix"]
    rendered = render_diagnostic(diagnostic)
    message = clip(diagnostic.message.splitlines()[0] if diagnostic.message else "problem", TITLE_LIMIT)
    instruction = template.instruction.format(location=location(label, diagnostic.range), diagnostics=rendered)
    action = _action(template, f"{template.title}: {message}", uri, diagnostic.range, instruction, [rendered])
    action.diagnostics = [diagnostic]
    return action


def _action(
    template: ActionTemplate,
    title: str,
    uri: str,
    text_range: types.Range | None,
    instruction: str,
    diagnostics: list[str] | None = None,
) -> types.CodeAction:
    argument: dict = {"instruction": instruction, "uri": uri}
    if text_range is not None:
        argument["range"] = {
            "start": {"line": text_range.start.line, "character": text_range.start.character},
            "end": {"line": text_range.end.line, "character": text_range.end.character},
        }
    if diagnostics:
        argument["diagnostics"] = diagnostics
    return types.CodeAction(
        title=title,
        kind=template.kind,
        command=types.Command(title=title, command=ASK, arguments=[argument]),
    )


def _allowed(kind: str | None, only: Sequence[str] | None) -> bool:
    """LSP's `only` filter: a kind matches its own name and any name it is a dot-prefix of."""
    if not only:
        return True
    kind = kind or ""
    return any(kind == wanted or kind.startswith(f"{wanted}.") or wanted == "" for wanted in only)
