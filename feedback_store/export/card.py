"""The dataset card: README.md beside every export, one section per exported file name.

A folder may hold several exports: each keeps its own section (between markers), and an export
replaces only its own. A README.md teachback did not write is left alone; the card then goes to
`<name>.README.md`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from feedback_store.errors import StoreError
from feedback_store.export.format_table import format_of

MARK = "<!-- teachback dataset card -->"

FIELDS = {
    "format": "teachback-<kind>-<version>",
    "id": "the feedback pair's id (kto: `-fix` for its correction)",
    "session_id / source": "the recorded session, and what gave the feedback (schema, tool, lint, test, user, hook, monitor)",
    "prompt": "the conversation before the failed reply, in the record's view (native or text)",
    "tools": "the tool schemas as JSON text (native view; null in the text view, whose system prompt lists them)",
    "completion / chosen / rejected": "assistant replies; `chosen` and sft/kto-true completions are a call that "
    "succeeded when it was made and applies at the prompt's workspace state (one call), as the model wrote it",
    "chosen_derived": "true when that call was composed from the net change of a file (the model made no such "
    "single call; written as the session's model writes calls), false when it is the model's own reply",
    "privileged_context": "trl-sdpo: the environment's feedback; trl-sdft: a fitting demonstration and the feedback",
    "ground_truth": "JSON for feedback_store.rewards: the failed call, the expected call, the feedback, tool schemas",
    "rendered": "what the model was given when it saw a rendered form: exact messages, prompt token ids, the "
    "sampled token ids and their logprobs; `chosen` and `chosen_token_ids`, the correction as the model writes "
    "it and the ids it sampled for it (token data dropped when redaction changed the text)",
    "label": "kto: whether the completion is desirable",
    "provenance": "where the record came from: agent and agent_version, model, repository (its root commit or "
    "remote, never a folder), commit, author (a salted hash of user and machine), teachback_version, content_hash",
}


@dataclass
class CardInfo:
    fmt: str
    format_name: str
    files: dict[str, int]  # file name -> records
    test_fraction: float
    template: str
    compact_tools: bool
    redact: bool
    redacted_kinds: Mapping[str, int]
    by_source: Mapping[str, int]
    by_kind: Mapping[str, int]
    left_out: Mapping[str, int]
    lengths: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    command: str = ""


def card_path(out: Path) -> Path:
    readme = out.parent / "README.md"
    if not readme.exists() or MARK in readme.read_text(encoding="utf-8", errors="replace"):
        return readme
    return out.with_name(f"{out.stem}.README.md")


def write_card(out: Path, info: CardInfo) -> Path:
    """Write (or update) the card beside `out`; StoreError when it cannot be read or written."""
    try:
        return _write_card(out, info)
    except OSError as exc:
        raise StoreError(
            f"Cannot write the dataset card beside {out}: {exc.strerror or exc}. Nothing was written; choose an "
            "--out path in a folder you may write."
        ) from exc


def _write_card(out: Path, info: CardInfo) -> Path:
    path = card_path(out)
    name = out.name
    begin, end = f"<!-- teachback:begin {name} -->", f"<!-- teachback:end {name} -->"
    section = f"{begin}\n{render_section(name, info)}\n{end}"
    old = (
        path.read_text(encoding="utf-8")
        if path.exists()
        else f"{MARK}\n# teachback feedback exports\n\n"
        "Training data exported from teachback's feedback store (`teachback export`).\n"
    )
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    text = pattern.sub(lambda _: section, old) if pattern.search(old) else f"{old.rstrip()}\n\n{section}\n"
    path.write_text(text, encoding="utf-8")
    return path


def render_section(name: str, info: CardInfo) -> str:
    files = ", ".join(f"`{f}` ({n} records)" for f, n in info.files.items())
    split = (
        "one file, no test split"
        if info.test_fraction <= 0
        else f"split by session (a hash of the session id; test fraction {info.test_fraction:g}): "
        "no conversation is on both sides"
    )
    redaction = (
        "off"
        if not info.redact
        else (
            "on; "
            + (", ".join(f"{k}: {n}" for k, n in sorted(info.redacted_kinds.items())) or "nothing found")
            + " (replacements, by rule)"
        )
    )
    lines = [
        f"## {name} — `{info.format_name}`",
        "",
        f"- Trainer: {format_of(info.fmt).trainer}",
        *([f"- Command: `{info.command}`"] if info.command else []),
        f"- Files: {files}",
        f"- Split: {split}",
        f"- View: template `{info.template}`" + (", compact tool schemas" if info.compact_tools else ""),
        f"- Redaction: {redaction}",
        "",
        "| source | records |",
        "|---|---|",
        *(f"| {k} | {n} |" for k, n in sorted(info.by_source.items())),
        "",
        "| error kind | records |",
        "|---|---|",
        *(f"| {k} | {n} |" for k, n in sorted(info.by_kind.items())),
        "",
        "Left out:" if info.left_out else "Left out: nothing.",
        *(f"- {k}: {n}" for k, n in sorted(info.left_out.items())),
        "",
        *info.lengths,
        "",
        *(f"Warning: {w}" for w in info.warnings),
        "",
        "Fields:",
        *(f"- `{k}`: {v}" for k, v in FIELDS.items()),
    ]
    return "\n".join(line for line in _squeeze(lines))


def _squeeze(lines: list[str]) -> list[str]:
    out: list[str] = []
    for line in lines:
        if line == "" and (not out or out[-1] == ""):
            continue
        out.append(line)
    return out
