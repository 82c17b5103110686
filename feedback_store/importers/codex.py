"""`teachback import codex`: Codex CLI's session logs (~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl).

Each line of a current log is `{"timestamp", "type", "payload"}` (codex-rs RolloutLine): `session_meta`
(the session's id, cwd, cli_version, instructions and `git`: commit_hash, branch, repository_url),
`turn_context` (the model of the turn), `response_item` (a `message`, `reasoning`, `function_call`,
`function_call_output`, `local_shell_call`, `custom_tool_call`, `custom_tool_call_output`, ...),
`event_msg` (client events: `turn_aborted` is an interrupt; the rest repeat the items) and `compacted`.
Logs written before the envelope begin with a header object (`id`, `timestamp`, `instructions`,
`git`) followed by bare response items and `{"record_type": "state"}` markers. A call's output is a
string (older versions: JSON text with `output` and `metadata.exit_code`; newer: "Exit code: N ..."
text) or an object with `content` and `success`. A refusal is the output "exec command rejected by
user" or "patch rejected by user".
"""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path
from typing import Any

from agent.protocol.arguments import arguments_or_text, value_or_text
from feedback_store.importers.log_lines import OBJECT, TEXT, TIME, BadLine, Shape, log_lines
from feedback_store.importers.trail import Identify, Outcome, Trail, timestamp
from feedback_store.team.provenance import remote_identity

AGENT = "codex"
COMMAND_TOOLS = ("shell", "local_shell", "exec_command", "container.exec")
EDIT_TOOLS = ("apply_patch",)
CALLS = frozenset({"function_call", "local_shell_call", "custom_tool_call"})
OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output"})
IGNORED_ITEMS = frozenset({"reasoning", "web_search_call", "ghost_snapshot", "compaction", "image_generation_call"})
ENVELOPE_TYPES = frozenset({"session_meta", "turn_context", "response_item", "event_msg", "compacted"})
CONTEXT = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions", "<permissions instructions>")
REFUSALS = ("exec command rejected by user", "patch rejected by user")
EXIT_CODE = re.compile(r"^(?:Exit code|Process exited with code):? (-?\d{1,9})\b", re.M)
PATCH_FILE = re.compile(r"^\*\*\* (?:Update|Add|Delete) File: (.+)$", re.M)
ERROR_KINDS = (
    (re.compile(r"verification failed|Failed to find expected lines|Failed to find context", re.I), "no_match"),
    (re.compile(r"failed to parse function arguments", re.I), "malformed_json"),
    (re.compile(r"unsupported call|unknown tool", re.I), "unknown_tool"),
    (re.compile(r"No such file or directory|does not exist", re.I), "not_found"),
    (re.compile(r"timed out", re.I), "timeout"),
)
# The fields of a response item this importer reads: in a current log's payload, and bare in an old log.
ITEM_SHAPE: Shape = {
    "type": TEXT,
    "id": TEXT,
    "role": TEXT,
    "model": TEXT,
    "call_id": TEXT,
    "name": TEXT,
    "cli_version": TEXT,
    "cwd": TEXT,
    "base_instructions": OBJECT,
    "git": OBJECT,
    "action": OBJECT,
}
# A line with one of these fields of another type is not read.
SHAPE: Shape = {
    "timestamp": TIME,
    "payload": OBJECT,
    **ITEM_SHAPE,
    **{f"payload.{k}": c for k, c in ITEM_SHAPE.items()},
}


def default_root() -> Path:
    return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex").expanduser() / "sessions"


def find_files(root: Path) -> list[Path]:
    return sorted(root.rglob("rollout-*.jsonl")) if root.is_dir() else [root]


class CodexTrail(Trail):
    def target_of(self, name: str, arguments: Any) -> str | None:
        if not isinstance(arguments, dict):
            return None
        command = arguments.get("command") or arguments.get("cmd")
        if isinstance(command, list) and all(isinstance(c, str) for c in command):
            shell = len(command) == 3 and command[0].endswith(("bash", "sh", "zsh")) and command[1] in ("-lc", "-c")
            return command[2] if shell else shlex.join(command)
        if isinstance(command, str):
            return command
        patch = arguments.get("input")
        if isinstance(patch, str):
            found = PATCH_FILE.search(patch)
            return found.group(1).strip() if found else None
        return arguments.get("path") if isinstance(arguments.get("path"), str) else None


def read(path: Path, identify: Identify) -> Trail:
    trail = CodexTrail(AGENT, _key(path), command_tools=COMMAND_TOOLS, edit_tools=EDIT_TOOLS)
    reader = _Reader(trail, identify)
    for number, entry in log_lines(path, SHAPE):
        trail.lines += 1
        if isinstance(entry, BadLine):
            trail.bad(entry)
        else:
            reader.line(f"L{number}", entry)
    reader.flush()
    return trail


def _key(path: Path) -> str:
    """The session id a rollout file's name ends with (rollout-<time>-<uuid>.jsonl)."""
    found = re.search(r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$", path.stem)
    return found.group(1) if found else path.stem


class _Reader:
    def __init__(self, trail: Trail, identify: Identify) -> None:
        self.trail, self.identify = trail, identify
        self.reply: dict[str, Any] | None = None

    def line(self, tag: str, entry: dict[str, Any]) -> None:
        ts = self.trail.seen(timestamp(entry.get("timestamp"), self.trail.started or 0.0))
        kind, payload = entry.get("type"), entry.get("payload")
        if kind in ENVELOPE_TYPES and isinstance(payload, dict):
            if kind == "session_meta":
                self.meta(payload, ts)
            elif kind == "turn_context":
                self.trail.model = payload.get("model") if isinstance(payload.get("model"), str) else self.trail.model
            elif kind == "response_item":
                self.item(tag, payload, ts)
            elif kind == "event_msg" and payload.get("type") == "turn_aborted":
                self.flush()
                self.trail.interrupt(ts)
        elif "record_type" in entry:
            return  # the old logs' state markers
        elif kind is None and "id" in entry and not self.trail.conversation:
            self.meta(entry, ts)  # the old logs' header line
        elif isinstance(kind, str) and ("role" in entry or kind in CALLS | OUTPUTS | IGNORED_ITEMS):
            self.item(tag, entry, ts)  # an old log's bare response item
        else:
            self.trail.skip("lines of a type this importer does not know")

    def meta(self, meta: dict[str, Any], ts: float) -> None:
        trail = self.trail
        if isinstance(meta.get("id"), str) and meta["id"]:
            trail.session_id = f"{AGENT}-{meta['id']}"
        trail.version = meta.get("cli_version") if isinstance(meta.get("cli_version"), str) else trail.version
        instructions = meta.get("instructions") or (meta.get("base_instructions") or {}).get("text")
        if isinstance(instructions, str) and instructions.strip():
            trail.context.append(instructions)
        git = meta.get("git") if isinstance(meta.get("git"), dict) else {}
        trail.commit = git.get("commit_hash") if isinstance(git.get("commit_hash"), str) else None
        cwd = meta.get("cwd")
        if isinstance(cwd, str) and cwd:
            trail.cwd = cwd
        local = identify_folder(self.identify, trail.cwd)
        trail.repository = local or remote_identity(git.get("repository_url"))
        trail.conversation = True

    def item(self, tag: str, item: dict[str, Any], ts: float) -> None:
        self.trail.conversation = True
        kind = item.get("type")
        if kind == "message":
            self.message(tag, item, ts)
        elif kind in CALLS:
            self.call(tag, item, ts)
        elif kind in OUTPUTS:
            self.flush()
            call_id = item.get("call_id")
            if isinstance(call_id, str):
                name = self.trail.calls.get(call_id, ("",))[0]
                self.trail.result(tag, call_id, outcome(name, item.get("output")), ts)
            else:
                self.trail.skip("call outputs with no call id")
        elif kind not in IGNORED_ITEMS:
            self.trail.skip("response items of a type this importer does not know")

    def message(self, tag: str, item: dict[str, Any], ts: float) -> None:
        role, text = item.get("role"), _text(item.get("content"))
        if role == "assistant":
            reply = self.pending(tag, ts)
            if text:
                reply["text"].append(text)
            return
        self.flush()
        if role in ("developer", "system") or text.lstrip().startswith(CONTEXT):
            if self.trail.turn == 0:
                self.trail.context.append(text)
            else:
                self.trail.skip("context the client added after the first instruction")
        elif role == "user" and text.strip():
            self.trail.user(tag, text, ts)

    def call(self, tag: str, item: dict[str, Any], ts: float) -> None:
        call_id = item.get("call_id") or item.get("id")
        if not isinstance(call_id, str):
            self.trail.skip("calls with no call id")
            return
        if item["type"] == "local_shell_call":
            action = item.get("action") if isinstance(item.get("action"), dict) else {}
            name, arguments = "local_shell", {k: v for k, v in action.items() if k != "type"}
        elif item["type"] == "custom_tool_call":
            name, arguments = str(item.get("name") or "custom"), {"input": item.get("input") or ""}
        else:
            name, raw = str(item.get("name") or "function"), item.get("arguments")
            arguments = _arguments(raw)
        self.pending(tag, ts)["calls"].append((call_id, name, arguments))

    def pending(self, tag: str, ts: float) -> dict[str, Any]:
        if self.reply is None:
            self.reply = {"tag": tag, "ts": ts, "text": [], "calls": []}
        return self.reply

    def flush(self) -> None:
        if self.reply is not None:
            reply, self.reply = self.reply, None
            self.trail.reply(reply["tag"], "\n\n".join(reply["text"]), reply["calls"], reply["ts"], self.trail.model)


def identify_folder(identify: Identify, cwd: str | None) -> str | None:
    return identify(Path(cwd)) if cwd and os.path.isdir(cwd) else None


def _arguments(raw: Any) -> Any:
    """A function call's arguments: JSON text as sent, read with the bounds a live call's are (kept
    as text when it is not an object)."""
    if isinstance(raw, str):
        return arguments_or_text(raw)
    return raw if isinstance(raw, dict) else {}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n".join(c["text"] for c in content if isinstance(c, dict) and isinstance(c.get("text"), str))


def outcome(name: str, output: Any) -> Outcome:
    """A call's output as teachback's outcome: refused, interrupted, a command's exit status, an
    error kind, or success."""
    success: bool | None = None
    exit_code: int | None = None
    if isinstance(output, dict):
        success = output.get("success") if isinstance(output.get("success"), bool) else None
        output = output.get("content") if isinstance(output.get("content"), str) else _text(output.get("content_items"))
    text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
    # older versions: {"output": ..., "metadata": {"exit_code": N, ...}} as text, read with bounds
    wrapped = value_or_text(text) if text.lstrip().startswith("{") else None
    if isinstance(wrapped, dict) and isinstance(wrapped.get("output"), str):
        metadata = wrapped.get("metadata") if isinstance(wrapped.get("metadata"), dict) else {}
        code = metadata.get("exit_code")
        exit_code = code if type(code) is int and -(2**31) <= code < 2**31 else None
        text = wrapped["output"]
    elif (found := EXIT_CODE.search(text)) is not None:
        exit_code = int(found.group(1))
    if text.strip() in REFUSALS:
        return Outcome(False, text, "denied", refused=True)
    if text.strip() == "aborted":
        return Outcome(False, text, "interrupted")
    if exit_code not in (None, 0) and name != "apply_patch":
        return Outcome(False, text, "exit_status", exit_code=exit_code)
    failed = success is False or exit_code not in (None, 0)
    kind = next((k for pattern, k in ERROR_KINDS if pattern.search(text)), None)
    if failed or (kind is not None and kind != "not_found"):
        return Outcome(False, text, kind or "failed")
    return Outcome(True, text)
