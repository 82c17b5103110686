"""`teachback import atif PATH...`: trajectories in the Agent Trajectory Interchange Format, whatever
agent wrote them (ATIF v1.0 to v1.8: Harbor's RFC 0001 and its models, harbor.models.trajectories;
each version only adds optional fields to the one before, v1.8 only audio content parts, which like
images are not text and are left out).

A trajectory is one JSON object: `schema_version` ("ATIF-v1.7"), `session_id`, `trajectory_id` (v1.7),
`agent` {`name`, `version`, `model_name`, `tool_definitions`}, `steps`, `final_metrics`, `extra`, and
(v1.7) embedded `subagent_trajectories`. A step has `step_id`, `timestamp`, `source` (system, user or
agent), `message` (text, or content parts since v1.6), `reasoning_content`, `tool_calls`
[{`tool_call_id`, `function_name`, `arguments`, `extra` (v1.7)}], `observation` {`results`
[{`source_call_id`, `content`, `extra` (v1.7)}]}, `metrics` (token counts, cost, token ids),
`is_copied_context` and `extra`. A `.json` file holds one trajectory, a `.jsonl` file one per line; a
folder is searched for both, Harbor's jobs folders included (a trial keeps `agent/trajectory.json`
beside `result.json`, whose `verifier_result.rewards.reward` is the task's reward; Harbor's own
`result.json` and `config.json` files and the verifier's folder are not trajectories).

Each trajectory becomes a session named after its agent (`atif-<agent>-<session id>`), recorded as
the other importers record theirs (feedback_store.importers.trail), so the same pair rules apply: a
failed call and the call that fixed it, a command that failed and passed again after an edit, a reply
the agent could not parse (a text-mode agent's format error) and the next call that worked. ATIF has
no field that says a call failed: teachback's own export says so in each result's `extra` (ok, error
kind, exit status); Harbor's claude-code and codex trajectories keep their agent's result text and
flags, read as those importers read them; for any other agent a result failed when its `extra` says
so (`is_error`, a non-zero exit code, an error status) or its text shows a non-zero exit code. Steps
copied from an earlier trajectory (`is_copied_context`) are left out, as the format asks. A task's
reward (Harbor's result, or teachback's own `extra.task`) is the session's `task.reward`; its
instance id is kept as `task.name` only, since an imported session's files cannot be rebuilt for
state replay.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.protocol.roles import NO_ROLES, Roles, builtin_roles
from feedback_store.content.hashing import canonical_json
from feedback_store.importers import claude, codex
from feedback_store.importers.atif_shape import RESULT_SHAPE, SHAPE, SUPPORTED, text_of
from feedback_store.importers.imports import ImportReport, files_to_read, record_trail, remember_import
from feedback_store.importers.log_lines import (
    MAX_LINE_BYTES,
    BadLine,
    log_lines,
    open_log,
    read_line,
    shape_problem,
)
from feedback_store.importers.trail import Outcome, Trail, timestamp
from feedback_store.store import Store
from feedback_store.team.provenance import TEACHBACK_AGENT

AGENT = "atif"
HARBOR_FILES = frozenset({"result.json", "config.json"})  # a Harbor job's and trial's own records
TEACHBACK_TOOLS = (("run_command",), ("edit_file", "create_file", "delete_file", "move_file"))
TOOLS_OF = {
    claude.AGENT: (claude.COMMAND_TOOLS, claude.EDIT_TOOLS),
    codex.AGENT: (codex.COMMAND_TOOLS, codex.EDIT_TOOLS),
    TEACHBACK_AGENT: TEACHBACK_TOOLS,
}
TARGETS = ("file_path", "path", "notebook_path", "command", "cmd", "keystrokes", "pattern", "url", "query")
EXIT_CODE = re.compile(
    r"<returncode>(-?\d{1,9})</returncode>|^\[exit_code\] (-?\d{1,9})|^(?:Exit code|Process exited with code):? (-?\d{1,9})",
    re.M,
)
UNPARSED = re.compile(r"parsing errors|could not be parsed|EXACTLY ONE action", re.I)
ERROR_FLAGS = ("is_error", "tool_result_is_error", "error")
ERROR_STATUS = frozenset({"error", "failed", "failure", "errored"})
NOT_ATIF = "files that are not ATIF trajectories"


class UnreadableTrajectory(OSError):
    """A file that is not a trajectory teachback can read: what is wrong with it, in words."""


@dataclass
class FileTrajectories:
    """What one file held: its trajectories as trails, and what was skipped."""

    trails: list[Trail] = field(default_factory=list)
    lines: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    bad_lines: list[BadLine] = field(default_factory=list)


def find_files(root: Path) -> list[Path]:
    """Every `.json` and `.jsonl` file under `root` (or `root` itself), but Harbor's own records,
    its verifier's folders and hidden folders (an export's staging)."""
    if not root.is_dir():
        return [root]
    found = []
    for path in sorted({*root.rglob("*.json"), *root.rglob("*.jsonl")}):
        folders = path.relative_to(root).parts[:-1]
        if path.name in HARBOR_FILES or "verifier" in folders or any(f.startswith(".") for f in folders):
            continue
        if not path.is_dir():
            found.append(path)
    return found


def import_trajectories(store: Store, files: list[Path]) -> ImportReport:
    """Import each file not imported before, or changed since; count what was skipped."""
    report = ImportReport()
    for path, stat, found in files_to_read(store, files, report, read):
        report.lines += found.lines
        report.skipped.update(found.skipped)
        report.bad_lines += [f"{path}:{line.number}: {line.detail}" for line in found.bad_lines]
        for trail in found.trails:
            report.skipped.update(trail.skipped)
            record_trail(store, trail, report)
        only = found.trails[0].session_id if len(found.trails) == 1 else None
        remember_import(store, path, AGENT, only, stat, found.lines, sum(found.skipped.values()))
    return report


def read(path: Path) -> FileTrajectories:
    """The trajectories of one file (UnreadableTrajectory when a `.json` file cannot be read as one)."""
    found = FileTrajectories()
    if path.suffix == ".jsonl":
        for number, entry in log_lines(path, SHAPE):
            found.lines += 1
            if isinstance(entry, BadLine):
                found.skipped[entry.reason] += 1
                found.bad_lines.append(entry)
            else:
                _add(found, entry, number, None, embedded=False)
        return found
    with open_log(path) as handle:
        data = handle.read(MAX_LINE_BYTES + 1)
    if len(data) > MAX_LINE_BYTES:
        raise UnreadableTrajectory(f"longer than {MAX_LINE_BYTES // 2**20} MB, not read")
    found.lines = 1
    entry = read_line(1, data.decode("utf-8", errors="replace"), SHAPE)
    if isinstance(entry, BadLine):
        raise UnreadableTrajectory(entry.detail)
    _add(found, entry, None, harbor_task(path), embedded=False)
    return found


def _add(
    found: FileTrajectories, entry: dict[str, Any], line: int | None, task: dict[str, Any] | None, *, embedded: bool
) -> None:
    """The trajectory `entry` (line `line` of a `.jsonl` file, or a whole `.json` file) and those
    embedded in it, as trails. What cannot be read is a bad line, or the whole file's problem."""
    version = entry.get("schema_version")
    if not isinstance(version, str) or not version.startswith("ATIF-"):
        found.skipped[NOT_ATIF] += 1
        return
    problem = _problem(entry)
    if problem is not None and line is None:
        raise UnreadableTrajectory(problem[1])
    if problem is not None:
        found.bad_lines.append(BadLine(line or 0, *problem))
        found.skipped[problem[0]] += 1
        return
    trail = trajectory_trail(entry, task, embedded=embedded)
    if trail.conversation:
        found.trails.append(trail)
    else:
        found.skipped["trajectories with no user or agent step"] += 1
    for sub in entry.get("subagent_trajectories") or []:
        if isinstance(sub, dict) and shape_problem(sub, SHAPE) is None and _problem(sub) is None:
            _add(found, sub, line, None, embedded=True)
        else:
            found.skipped["embedded subagent trajectories that could not be read"] += 1


def _problem(entry: dict[str, Any]) -> tuple[str, str] | None:
    """Why a trajectory whose fields have the right types still cannot be read: (reason, detail)."""
    version = entry.get("schema_version")
    if version not in SUPPORTED:
        return (
            "trajectories of an ATIF version this teachback does not read",
            f"{version} is not a version this teachback reads (ATIF-v1.0 to ATIF-v1.8)",
        )
    if not isinstance(entry.get("agent"), dict) or "name" not in entry["agent"]:
        return "trajectories with no agent", "it has no `agent` with a `name`"
    if not entry.get("steps"):
        return "trajectories with no steps", "it has no `steps`"
    for i, step in enumerate(entry["steps"]):
        missing = [f"`steps[{i}].source`"] if "source" not in step else []
        for j, call in enumerate(step.get("tool_calls") or []):
            missing += [f"`steps[{i}].tool_calls[{j}].{k}`" for k in ("tool_call_id", "function_name") if k not in call]
        if missing:
            return "trajectories missing a field the format requires", f"it has no {missing[0]}"
    return None


class AtifTrail(Trail):
    """An ATIF trajectory's session: its agent's tools, as its agent's own importer knows them."""

    def __init__(self, agent: str, key: str, declared: list[Any]) -> None:
        commands, edits = TOOLS_OF.get(agent, ((), ()))
        super().__init__(agent, key, command_tools=commands, edit_tools=edits)
        self.session_id = f"atif-{agent}-{key.removeprefix(f'atif-{agent}-').removeprefix(f'{agent}-')}"
        self.declared = {
            t["function"]["name"]: t
            for t in declared
            if isinstance(t, dict)
            and isinstance(t.get("function"), dict)
            and isinstance(t["function"].get("name"), str)
        }

    def roles_of(self, name: str) -> dict[str, Any]:
        if self.agent == TEACHBACK_AGENT:
            return builtin_roles().get(name, NO_ROLES).to_dict()
        return super().roles_of(name)

    def target_of(self, name: str, arguments: Any) -> str | None:
        if not isinstance(arguments, dict):
            return None
        roles = Roles.from_dict(self.roles_of(name))
        if roles.target is not None:
            return roles.target_of(arguments)
        return next((arguments[k] for k in TARGETS if isinstance(arguments.get(k), str)), None)

    def tools(self) -> list[dict[str, Any]]:
        rest = [t for t in super().tools() if t["function"]["name"] not in self.declared]
        used = [self.declared[name] for name in self.arguments if name in self.declared]
        return used + rest


def trajectory_trail(entry: dict[str, Any], task: dict[str, Any] | None, *, embedded: bool) -> Trail:
    """One trajectory, its shape checked, as a trail of teachback events. Its events are named by
    the session and the step's place in it, not by the file or line, so the same trajectory read
    from another file adds nothing."""
    agent = entry["agent"]
    name = agent["name"] or "unknown"
    # an embedded subagent may share its parent's run id (v1.7): its own trajectory id names it
    ids = ("trajectory_id", "session_id") if embedded else ("session_id", "trajectory_id")
    key = next((entry[k] for k in ids if entry.get(k)), None)
    if not key:  # optional since v1.7: the trajectory's content names it, so a second import adds nothing
        key = hashlib.sha256(canonical_json(entry).encode("utf-8")).hexdigest()[:32]
    trail = AtifTrail(name, key, agent.get("tool_definitions") or [])
    trail.version = agent.get("version")
    trail.model = agent.get("model_name")
    trail.task = task or own_task(entry.get("extra"))
    ts = 0.0
    for index, step in enumerate(entry["steps"]):
        step_tag = f"S{index + 1}"
        if step.get("is_copied_context"):
            trail.skip("steps copied from an earlier trajectory")
            continue
        ts = trail.seen(timestamp(step.get("timestamp"), ts))
        source, text = step.get("source"), text_of(step.get("message"))
        if source == "system":
            if trail.turn == 0 and text.strip():
                trail.context.append(text)
            elif trail.turn:
                trail.skip("system steps after the first instruction")
        elif source == "user":
            trail.conversation = True
            trail.user(step_tag, text, ts)
        elif source == "agent":
            trail.conversation = True
            _agent_step(trail, step_tag, step, text, ts)
        else:
            trail.skip("steps of a source ATIF does not define")
    return trail


def _agent_step(trail: AtifTrail, tag: str, step: dict[str, Any], text: str, ts: float) -> None:
    calls = [
        (c["tool_call_id"], c["function_name"], c.get("arguments") or {}, c.get("extra") or {})
        for c in step.get("tool_calls") or []
    ]
    metrics = step.get("metrics") or {}
    usage = None
    if metrics.get("prompt_tokens") is not None or metrics.get("completion_tokens") is not None:
        usage = (metrics.get("prompt_tokens") or 0, metrics.get("completion_tokens") or 0)
    trail.reply(tag, text, [c[:3] for c in calls], ts, step.get("model_name"), usage)
    names = {c[0]: c[1] for c in calls}
    answered: set[str] = set()
    shared: list[dict[str, Any]] = []  # results no call is named in: the output of the step's calls together
    for index, result in enumerate((step.get("observation") or {}).get("results") or []):
        call_id = result.get("source_call_id")
        if call_id is None:
            shared.append(result)
            continue
        answered.add(call_id)
        trail.result(f"{tag}-R{index}", call_id, outcome(trail.agent, names.get(call_id, ""), result), ts)
    for index, result in enumerate(shared):
        waiting = [c for c in names if c not in answered]
        if not calls and _unparsed(result):
            trail.unparsed(f"{tag}-U{index}", text_of(result.get("content")), ts)
        elif not waiting:
            trail.skip("observation results that answer no call")
        for call_id in waiting:
            trail.result(f"{tag}-U{index}-{call_id}", call_id, outcome(trail.agent, names[call_id], result), ts)
            answered.add(call_id)


def _unparsed(result: dict[str, Any]) -> bool:
    """Whether a result that answers no call says the reply could not be read as one: as teachback's
    export says it (its error kind), or as text-mode agents word it."""
    extra = result.get("extra") if isinstance(result.get("extra"), dict) else {}
    if isinstance(extra.get("ok"), bool):
        return extra.get("error_kind") == "malformed_call"
    return UNPARSED.search(text_of(result.get("content"))) is not None


def outcome(agent: str, name: str, result: dict[str, Any]) -> Outcome:
    """What a call came to, by what its result says (the module's docstring says how)."""
    text = text_of(result.get("content"))
    extra = result.get("extra") if isinstance(result.get("extra"), dict) else {}
    if isinstance(extra.get("ok"), bool):  # teachback's own export
        code = extra.get("exit_code")
        kind = extra.get("error_kind") if isinstance(extra.get("error_kind"), str) else "failed"
        exit_code = code if type(code) is int and -(2**31) <= code < 2**31 else None
        return Outcome(True, text) if extra["ok"] else Outcome(False, text, kind, exit_code=exit_code)
    if agent == claude.AGENT:
        metadata = extra.get("tool_result_metadata")
        tool_result = metadata.get("tool_use_result") if isinstance(metadata, dict) else None
        failed = extra.get("tool_result_is_error") is True or "[error] tool reported failure" in text
        return claude.outcome(name, text, failed, tool_result)
    if agent == codex.AGENT:
        return codex.outcome(name, text)
    code = next(
        (v for k in ("exit_code", "exitCode", "returncode", "return_code") if type(v := extra.get(k)) is int), None
    )
    if code is None and (found := EXIT_CODE.search(text)) is not None:
        code = int(next(g for g in found.groups() if g is not None))
    if code not in (None, 0) and -(2**31) <= code < 2**31:
        return Outcome(False, text, "exit_status", exit_code=code)
    if any(extra.get(k) is True for k in ERROR_FLAGS) or str(extra.get("status", "")).lower() in ERROR_STATUS:
        kind = next((k for pattern, k in claude.ERROR_KINDS if pattern.search(text)), "failed")
        return Outcome(False, text, kind)
    return Outcome(True, text)


def own_task(extra: Any) -> dict[str, Any] | None:
    """The task and reward teachback's own export keeps in the trajectory's `extra.task`."""
    task = extra.get("task") if isinstance(extra, dict) else None
    if not isinstance(task, dict):
        return None
    source = task.get("source") if isinstance(task.get("source"), str) else "teachback"
    kept = {k: task[k] for k in ("trial", "exception") if isinstance(task.get(k), str)}
    return {**_task(task.get("instance_id") or task.get("name"), task.get("reward"), source), **kept}


def harbor_task(path: Path) -> dict[str, Any] | None:
    """The task and reward of the Harbor trial whose agent wrote `path` (a trial's
    agent/trajectory.json, or a continuation of it), from the trial's result.json."""
    if path.parent.name != "agent" or not re.fullmatch(r"trajectory(\.cont-\d+)?\.json", path.name):
        return None
    result_path = path.parent.parent / "result.json"
    try:
        with open_log(result_path) as handle:
            data = handle.read(MAX_LINE_BYTES + 1)
    except OSError:
        return None  # a trial that has not finished (or a folder shaped like one): no reward yet
    result = read_line(1, data.decode("utf-8", errors="replace"), RESULT_SHAPE)
    if isinstance(result, BadLine):
        return None
    rewards = (result.get("verifier_result") or {}).get("rewards") or {}
    values = [v for v in rewards.values() if _number(v)]
    reward = rewards.get("reward") if _number(rewards.get("reward")) else values[0] if len(values) == 1 else None
    task = _task(result.get("task_name"), reward, "harbor")
    if isinstance(result.get("trial_name"), str):
        task["trial"] = result["trial_name"]
    exception = result.get("exception_info")
    if isinstance(exception, dict) and isinstance(exception.get("exception_type"), str):
        task["exception"] = exception["exception_type"]
    return task


def _task(name: Any, reward: Any, source: str) -> dict[str, Any]:
    return {
        "name": name if isinstance(name, str) else None,
        "reward": float(reward) if _number(reward) else None,
        "source": source,
    }


def _number(value: Any) -> bool:
    return type(value) in (int, float) and abs(value) < 2**53
