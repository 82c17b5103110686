"""`teachback import claude-code`: Claude Code's session logs (~/.claude/projects/<project>/<session>.jsonl).

Each line is one JSON object. Lines of type `user` hold the user's words (`message.content`, a string
or text blocks) or the results of tool calls (`tool_result` blocks with `is_error`, and the tool's own
`toolUseResult`); lines of type `assistant` hold one block of a model reply each (`text`, `thinking`,
`tool_use`), the blocks of one reply sharing `message.id`. Every line carries `sessionId`, `uuid` /
`parentUuid`, `cwd`, `gitBranch`, `version` and `timestamp`. A refused tool use is a `tool_result`
that begins "The user doesn't want to proceed with this tool use"; an interrupt is the user text
"[Request interrupted by user]" (or "... for tool use"). `summary`, `system`, `file-history-snapshot`,
`queue-operation` and `progress` lines are not part of the conversation; sub-agent (sidechain) lines,
synthetic replies (model `<synthetic>`, an API error shown as a reply) and thinking blocks are left
out; the log keeps the conversation in file order (branches that `parentUuid` would tell apart are
not separated).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from feedback_store.importers.log_lines import COUNT, OBJECT, TEXT, TEXT_OR_LIST, TIME, BadLine, Shape, log_lines
from feedback_store.importers.trail import Identify, Outcome, Trail, timestamp

AGENT = "claude-code"
COMMAND_TOOLS = ("Bash",)
EDIT_TOOLS = ("Edit", "MultiEdit", "Write", "NotebookEdit")
TARGETS = ("file_path", "notebook_path", "command", "path", "pattern", "url", "query")
INTERRUPTS = ("[Request interrupted by user]", "[Request interrupted by user for tool use]")
REFUSED = "The user doesn't want to proceed with this tool use"
SAID = re.compile(r"the user said:\s*(.+)\Z", re.S | re.I)
NOT_CONVERSATION = frozenset({"summary", "system", "file-history-snapshot", "queue-operation", "progress"})
EXIT_CODE = re.compile(r"^(?:Error: )?Exit code (\d{1,9})\b")
TOKENS = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
# The fields this importer reads, as the format has them; a line with one of another type is not read.
SHAPE: Shape = {
    "type": TEXT,
    "sessionId": TEXT,
    "version": TEXT,
    "cwd": TEXT,
    "timestamp": TIME,
    "message": OBJECT,
    "message.model": TEXT,
    "message.usage": OBJECT,
    **{f"message.usage.{k}": COUNT for k in (*TOKENS, "output_tokens")},
    "message.content": TEXT_OR_LIST,
    "message.content.*.type": TEXT,
    "message.content.*.text": TEXT,
    "message.content.*.id": TEXT,
    "message.content.*.name": TEXT,
    "message.content.*.tool_use_id": TEXT,
    "message.content.*.content": TEXT_OR_LIST,
    "message.content.*.content.*.text": TEXT,
}
ERROR_KINDS = (  # (what the tool's error says, teachback's error kind), first match wins
    (re.compile(r"does not exist|no such file|ENOENT|not found in the workspace", re.I), "not_found"),
    (re.compile(r"String to replace not found|old_string.*not found", re.I), "no_match"),
    (re.compile(r"Found \d+ matches of the string to replace", re.I), "ambiguous"),
    (re.compile(r"InputValidationError|Invalid tool parameters|required parameter", re.I), "bad_arguments"),
    (re.compile(r"No such tool available", re.I), "unknown_tool"),
    (re.compile(r"timed out", re.I), "timeout"),
    (re.compile(r"exceeds maximum allowed|too large", re.I), "too_large"),
    (re.compile(r"binary file", re.I), "binary"),
)


def default_root() -> Path:
    return Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude").expanduser() / "projects"


def find_files(root: Path) -> list[Path]:
    return sorted(root.rglob("*.jsonl")) if root.is_dir() else [root]


class ClaudeTrail(Trail):
    def target_of(self, name: str, arguments: Any) -> str | None:
        if not isinstance(arguments, dict):
            return None
        return next((arguments[k] for k in TARGETS if isinstance(arguments.get(k), str)), None)


def read(path: Path, identify: Identify) -> Trail:
    trail = ClaudeTrail(AGENT, path.stem, command_tools=COMMAND_TOOLS, edit_tools=EDIT_TOOLS)
    names: dict[str, str] = {}  # tool_use id -> tool name
    reply: dict[str, Any] | None = None  # the reply being gathered from its lines
    for number, entry in log_lines(path, SHAPE):
        trail.lines += 1
        if isinstance(entry, BadLine):
            trail.bad(entry)
            continue
        kind = entry.get("type")
        if kind in NOT_CONVERSATION:
            continue
        if kind not in ("user", "assistant"):
            trail.skip("lines of a type this importer does not know")
            continue
        if entry.get("isSidechain"):
            trail.skip("sub-agent (sidechain) lines")
            continue
        message = entry.get("message")
        if not isinstance(message, dict):
            trail.skip("lines with no message")
            continue
        if not trail.conversation:
            trail.conversation = True
            _meta(trail, entry, identify)
        ts = trail.seen(timestamp(entry.get("timestamp"), trail.started or 0.0))
        if kind == "assistant":
            if reply is not None and reply["id"] != message.get("id"):
                _send(trail, reply)
                reply = None
            if message.get("model") == "<synthetic>":
                trail.skip("synthetic replies (API errors shown as replies)")
                continue
            reply = reply or {"id": message.get("id"), "tag": f"L{number}", "ts": ts, "text": [], "calls": []}
            _gather(reply, message, names)
            continue
        if reply is not None:
            _send(trail, reply)
            reply = None
        if entry.get("isMeta"):
            continue  # notices the client added, not the user's words
        _user(trail, f"L{number}", message.get("content"), entry.get("toolUseResult"), names, ts)
    if reply is not None:
        _send(trail, reply)
    return trail


def _meta(trail: Trail, entry: dict[str, Any], identify: Identify) -> None:
    if isinstance(entry.get("sessionId"), str) and entry["sessionId"]:
        trail.session_id = f"{AGENT}-{entry['sessionId']}"
    trail.version = entry.get("version") if isinstance(entry.get("version"), str) else None
    cwd = entry.get("cwd")
    if isinstance(cwd, str) and cwd:
        trail.cwd = cwd
        if os.path.isdir(cwd):  # the repository's identity, when its folder is on this machine
            trail.repository = identify(Path(cwd))


def _gather(reply: dict[str, Any], message: dict[str, Any], names: dict[str, str]) -> None:
    reply["model"] = reply.get("model") or message.get("model")
    usage = message.get("usage")
    if isinstance(usage, dict):
        prompt = sum(usage.get(k) or 0 for k in TOKENS)  # counts: the line's shape was checked
        reply["usage"] = (prompt, usage.get("output_tokens") or 0)
    content = message.get("content")
    for block in [{"type": "text", "text": content}] if isinstance(content, str) else content or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            reply["text"].append(block["text"])
        elif (
            block.get("type") == "tool_use" and isinstance(block.get("id"), str) and isinstance(block.get("name"), str)
        ):
            names[block["id"]] = block["name"]
            reply["calls"].append((block["id"], block["name"], block.get("input") or {}))


def _send(trail: Trail, reply: dict[str, Any]) -> None:
    trail.reply(
        reply["tag"], "\n\n".join(reply["text"]), reply["calls"], reply["ts"], reply.get("model"), reply.get("usage")
    )


def _user(trail: Trail, tag: str, content: Any, tool_result: Any, names: dict[str, str], ts: float) -> None:
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    if not isinstance(blocks, list):
        trail.skip("user lines with no content")
        return
    words = []
    for index, block in enumerate(blocks):
        if not isinstance(block, dict):
            continue
        if block.get("type") == "tool_result" and isinstance(block.get("tool_use_id"), str):
            call_id = block["tool_use_id"]
            text = _text(block.get("content"))
            name = names.get(call_id, "")
            trail.result(f"{tag}-{index}", call_id, outcome(name, text, bool(block.get("is_error")), tool_result), ts)
        elif block.get("type") == "text" and isinstance(block.get("text"), str):
            words.append(block["text"])
    said = "\n\n".join(w for w in words if w.strip())
    if said.strip() in INTERRUPTS:
        trail.interrupt(ts)
    elif said.strip():
        trail.user(tag, said, ts)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def outcome(name: str, text: str, is_error: bool, tool_result: Any = None) -> Outcome:
    """A tool_result as teachback's outcome: refused, a command's exit status, or an error kind."""
    if not is_error:
        return Outcome(True, text)
    bare = re.sub(r"</?tool_use_error>", "", text).strip()
    if bare.startswith(REFUSED):
        said = SAID.search(bare)  # newer versions put the user's reason in the result itself
        return Outcome(False, text, "denied", refused=True, comment=said.group(1).strip() if said else None)
    code = EXIT_CODE.match(bare)
    if code is not None or (name in COMMAND_TOOLS and isinstance(tool_result, dict)):
        exit_code = int(code.group(1)) if code else None
        return Outcome(False, text, "exit_status", exit_code=exit_code)
    kind = next((k for pattern, k in ERROR_KINDS if pattern.search(bare)), "failed")
    return Outcome(False, text, kind)
