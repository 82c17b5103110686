"""`teachback tasks branch`: training data from branch sampling at recorded states.

At every state of a database's task sessions (tasks.states) the served model draws K more replies
(seeds 0..K-1, the session's temperature and tool mode), each labelled by running it on a scratch
copy of the files as they were. The records are on-policy and in the model's own formatting: the
prompt is the text-mode conversation exactly as the model was given it, and a completion is one
assistant message holding the raw sampled text, decoded from the sampled token ids with the model's
own vocabulary (it ends where the model ended its turn; the chat template adds the end-of-turn
token alike for every completion).

- sft: the verified successes (`ok`, `finished`), each distinct text of a state once;
- dpo: each distinct failure of a state (a call error or a premature finish) with one of that
  state's successes (taken in turn), sharing the prompt;
- sdpo: the same failures with their success as a demonstration and what the labeller found.

Beyond the K samples (tasks.sources), each checked by running it: failures with a wrong path repaired
to the nearest existing one; where no sample succeeded, replies drawn with the failure's feedback in
context and kept for the student's prompt only where they succeed without it; at each session's
first state, no-tool counter-examples (`finish` chosen, a call rejected); and replies drawn one step
after a state's first verified success (`forward`), a later state than the recording may reach. Every
record names its source.

A reply that stopped at the token cap is neither, whatever its label (a malformed call when cut
off mid-JSON, an answer when it began none): it did not end its turn, so as a completion it would end with an
end-of-turn token the model never sampled. Answers without a call and commands that ran
and failed are left out too.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterable
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from tasks import sources
from tasks.sources import Branch
from tasks.states import (
    OK,
    PREMATURE,
    Label,
    Sampler,
    Scratch,
    State,
    StateError,
    label_reply,
    load_states,
    next_state,
    recorded_cap,
    replayable,
)

Message = dict[str, Any]
Say = Callable[[str], None]
KINDS = ("sft", "dpo", "sdpo")
FORMATS = {kind: f"teachback-branch-{kind}-1" for kind in KINDS}
DEFAULT_MODEL = "local/smollm2@none"
DRAWN = frozenset({"sampled", "forward"})  # replies drawn at a state as they are (not repaired, not hinted)


@dataclass(frozen=True)
class At:
    """Which state a group of branches was drawn at."""

    session_id: str
    step: int
    task_id: str
    ahead: bool = False  # a state one step after a verified success, not one the session recorded


# ---------------------------------------------------------------------------------------------
# Records: a pure function of one state's branches


def build_records(at: At, branches: list[Branch]) -> dict[str, list[dict[str, Any]]]:
    """The sft, dpo and sdpo records of one state's labelled branches. Only branches given the very
    prompt of the first are used, so a pair's two sides always share their prompt."""
    first = branches[0].prompt if branches else None
    ids = branches[0].prompt_ids if branches else None
    # One prompt object for all the state's records: the writer redacts it once. A reply drawn with a
    # hint in context (prompt None) is the student's: it takes the state's prompt.
    same = [
        replace(b, prompt=first, prompt_ids=b.prompt_ids if b.prompt is not None else ids)
        for b in branches
        if b.prompt is None or b.prompt == first
    ]
    successes = _distinct(b for b in same if b.success)
    failures = _distinct(b for b in same if b.failure)
    out: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
    out["sft"] = [_sft(at, b) for b in successes]
    if successes:
        for number, failed in enumerate(failures):
            worked = successes[number % len(successes)]
            out["dpo"].append(_dpo(at, worked, failed))
            out["sdpo"].append(_sdpo(at, worked, failed))
    return out


def _distinct(branches: Iterable[Branch]) -> list[Branch]:
    seen: set[str] = set()
    kept = []
    for branch in branches:
        if branch.text not in seen:
            seen.add(branch.text)
            kept.append(branch)
    return kept


def _assistant(branch: Branch) -> list[Message]:
    return [{"role": "assistant", "content": branch.text}]


def _head(kind: str, at: At, *seeds: int) -> dict[str, Any]:
    return {
        "format": FORMATS[kind],
        "id": f"{at.session_id}:{at.step}{'+' if at.ahead else ''}:{':'.join(map(str, seeds))}",
        "session_id": at.session_id,
        "step": at.step,
        "task_id": at.task_id,
    }


def _sft(at: At, ok: Branch) -> dict[str, Any]:
    return {
        **_head("sft", at, ok.seed),
        "seed": ok.seed,
        "label": ok.label.kind,
        "source": ok.source,
        "prompt": ok.prompt,
        "completion": _assistant(ok),
        "token_ids": {"prompt": ok.prompt_ids, "completion": ok.completion_ids},
    }


def _dpo(at: At, chosen: Branch, rejected: Branch) -> dict[str, Any]:
    return {
        **_head("dpo", at, chosen.seed, rejected.seed),
        "seeds": {"chosen": chosen.seed, "rejected": rejected.seed},
        "labels": {"chosen": chosen.label.kind, "rejected": rejected.label.kind},
        "source": chosen.source,
        "prompt": chosen.prompt,
        "chosen": _assistant(chosen),
        "rejected": _assistant(rejected),
        "token_ids": {
            "prompt": chosen.prompt_ids,
            "chosen": chosen.completion_ids,
            "rejected": rejected.completion_ids,
        },
    }


def _sdpo(at: At, demonstration: Branch, failed: Branch) -> dict[str, Any]:
    # As the trl-sdpo / trl-sdft exports: `prompt` ends with a user turn, `privileged_context` is
    # what a teacher knows that the student did not (here a same-state success and the failure).
    said = feedback(failed.label)
    return {
        **_head("sdpo", at, failed.seed, demonstration.seed),
        "seeds": {"completion": failed.seed, "demonstration": demonstration.seed},
        "labels": {"completion": failed.label.kind, "demonstration": demonstration.label.kind},
        "source": demonstration.source,
        "prompt": failed.prompt,
        "completion": _assistant(failed),
        "demonstration": _assistant(demonstration),
        "feedback": said,
        "privileged_context": f"Example response:\n{demonstration.text}\n\nWhy an earlier reply failed: {said}",
        "token_ids": {
            "prompt": failed.prompt_ids,
            "completion": failed.completion_ids,
            "demonstration": demonstration.completion_ids,
        },
    }


def feedback(label: Label) -> str:
    """What running the failed reply found, in words (the labeller gives the kind, not the text)."""
    calls = ", ".join(label.tools) or "no call"
    if label.kind == PREMATURE:
        return f"The reply ({calls}) called finish while the task's tests still fail."
    return f"The reply's call ({calls}) failed: {label.kind}."


# ---------------------------------------------------------------------------------------------
# Sampling and labelling


@dataclass(frozen=True)
class BranchConfig:
    db: Path
    out: Path
    task_file: Path
    model: str = DEFAULT_MODEL
    samples: int = 4
    cap: int | None = None  # tokens per reply; None: each session's own max_tokens
    redact: bool = True
    sessions: frozenset[str] | None = None  # only these sessions' states (e.g. a training split); None: all
    max_per_session: int | None = None  # states per session, the first ones; None: all
    repairs: bool = True  # failures with a wrong path, repaired to the nearest existing one and run (tasks.sources)
    hint_samples: int = 0  # at a state with no success: replies drawn with the failure's feedback in context
    no_tool_samples: int = 0  # at each session's first state: replies to one of training's no-tool questions
    forward_samples: int = 0  # at the state one step after a state's first verified success: replies drawn there
    executor: str = "local"  # where each session's states are sampled and labelled (tasks.executors)
    parallel: int = 1  # sessions at once; 1 with the local executor: in this process, state by state
    address: str | None = None  # the Ray cluster's; None: a local Ray started for the run


@dataclass
class BranchResult:
    states: int = 0
    samples: int = 0
    labels: Counter[str] = field(default_factory=Counter)
    records: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    redactions: int = 0
    sources: Counter[str] = field(default_factory=Counter)  # verified successes by source
    paths: dict[str, Path] = field(default_factory=dict)
    wall_s: float = 0.0


def run_branches(config: BranchConfig, say: Say | None = None) -> BranchResult:
    """Sample, label and write `config.out`/{sft,dpo,sdpo}.jsonl, each state's records as soon as
    its samples are labelled."""
    from feedback_store.redaction.redactor import Redactor

    started = time.perf_counter()
    states, tasks = _replayable(config)
    here = config.executor == "local" and config.parallel <= 1  # otherwise each unit loads the vocabulary
    decode = vocabulary(config.model) if here else None
    redactor = Redactor() if config.redact else None
    result = BranchResult(states=len(states))
    config.out.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        files: dict[str, IO[str]] = {}
        for kind in KINDS:
            result.paths[kind] = config.out / f"{kind}.jsonl"
            files[kind] = stack.enter_context(result.paths[kind].open("w", encoding="utf-8"))
        writer = RecordWriter(files, redactor, result)
        if decode is not None:
            asyncio.run(_branch_all(config, states, tasks, decode, writer, say or (lambda _: None)))
        else:
            from tasks.state_groups import branch_spread

            branch_spread(config, states, tasks, writer, say or (lambda _: None), branch_one, vocabulary)
    result.redactions = redactor.total if redactor else 0
    result.wall_s = round(time.perf_counter() - started, 1)
    return result


@dataclass
class RecordWriter:
    """Writes each state's records, redacted (when a redactor is given), to one file per kind."""

    files: dict[str, IO[str]]
    redactor: Any  # feedback_store.redaction.redactor.Redactor | None
    result: BranchResult

    def add(self, at: At, branches: list[Branch]) -> None:
        from feedback_store.export.export_io import redact_record
        from feedback_store.export.views import Memo

        drawn = [b for b in branches if b.source in DRAWN]
        self.result.samples += len(drawn)
        self.result.labels.update(b.label.kind for b in drawn)
        self.result.sources.update(b.source for b in branches if b.success)
        memo = Memo()  # a state's records share their prompt: it is redacted once
        for kind, records in build_records(at, branches).items():
            for record in records:
                clean = _scrubbed(record, redact_record(record, self.redactor, memo))
                self.files[kind].write(json.dumps(clean, ensure_ascii=False) + "\n")
                self.result.records[kind] += 1
        for file in self.files.values():  # a state's records are on disk before the next is sampled
            file.flush()


def _scrubbed(record: dict[str, Any], clean: dict[str, Any]) -> dict[str, Any]:
    """Token ids would still spell a redacted secret out: the ids of a text redaction changed go."""
    if clean == record:
        return record
    ids = {key: None if clean[key] != record[key] else value for key, value in clean["token_ids"].items()}
    return {**clean, "token_ids": ids}


def _replayable(config: BranchConfig) -> tuple[list[State], dict[str, Any]]:
    from tasks.records import load_tasks

    if not config.model.startswith(("local/", "scripted/")):
        raise StateError(
            f"--model {config.model}: branches are sampled with the embedded model, whose token ids and "
            "vocabulary make the records; give local/<model>[@adapter], e.g. local/smollm2@none "
            "(or scripted/<file>, the deterministic fake)"
        )
    if config.samples < 1:
        raise StateError(f"--samples {config.samples}: give at least 1")
    states = [s for s in load_states(config.db, max_per_session=config.max_per_session) if replayable(s)]
    if config.sessions is not None:
        states = [s for s in states if s.session_id in config.sessions]
    if not states:
        raise StateError(
            f"{config.db} holds no replayable states{' in the sessions asked for' if config.sessions else ''}: "
            "record task attempts of the embedded model first "
            "(teachback tasks run --model local/smollm2), which store each call's prompt tokens"
        )
    tasks = {t.instance_id: t for t in load_tasks(config.task_file)}
    missing = sorted({s.task_id for s in states} - set(tasks))
    if missing:
        raise StateError(f"the tasks {', '.join(missing[:3])} are not in {config.task_file}: give their --tasks file")
    return states, tasks


async def _branch_all(
    config: BranchConfig,
    states: list[State],
    tasks: dict[str, Any],
    decode: Callable[[list[int]], str],
    writer: RecordWriter,
    say: Say,
) -> None:
    asked: set[str] = set()  # sessions whose first state gave a no-tool question
    for number, state in enumerate(states, 1):
        first = state.session_id not in asked
        asked.add(state.session_id)
        found, lines = await branch_one(
            config, state, tasks[state.task_id], decode, first, f"state {number}/{len(states)}"
        )
        for at, branches in found:
            writer.add(at, branches)
        for line in lines:
            say(line)


async def branch_one(
    config: BranchConfig, state: State, task: Any, decode: Callable[[list[int]], str], first: bool, name: str
) -> tuple[list[tuple[At, list[Branch]]], list[str]]:
    """The labelled branches at `state` (and one step on, and, at a session's `first` state, its
    no-tool questions), each group with the state it was drawn at, in the order they are written;
    and the progress lines to say."""
    sampler = Sampler(config.model, cap=config.cap or recorded_cap(state))
    scratch = Scratch(state, task, config.task_file)
    try:
        branches = await branch_state(state, sampler, config.samples, scratch, task, config.task_file, decode)
        branches += await more_branches(config, state, branches, sampler, scratch, task, decode)
        ahead = await forward_branches(config, state, branches, sampler, scratch, task, decode)
    finally:
        scratch.close()
    found = [(At(state.session_id, state.step, state.task_id), branches)]
    lines = []
    if ahead is not None:
        found.append((At(state.session_id, ahead[0].step, state.task_id, ahead=True), ahead[1]))
        lines.append(f"{name}, one step on: {', '.join(b.label.kind + _mark(b) for b in ahead[1])}")
    if config.no_tool_samples and first:
        questions = await sources.no_tool(state, sampler, config.no_tool_samples, decode)
        found.append((At(state.session_id, -1, state.task_id), questions))
    lines.append(f"{name}: {', '.join(f'{b.label.kind}' + _mark(b) for b in branches)}")
    return found, lines


async def more_branches(
    config: BranchConfig, state: State, branches: list[Branch], sampler: Sampler, scratch: Scratch, task: Any, decode
) -> list[Branch]:
    """Verified successes beyond the samples (tasks.sources): repaired wrong paths and, where no sample
    succeeded, replies drawn with the first failure's feedback in context."""
    found = []
    if config.repairs:
        for failed in (b for b in branches if b.failure):
            fixed = await sources.repaired(state, failed, scratch, task, config.task_file)
            if fixed is not None:
                found.append(fixed)
    failures = [b for b in branches if b.failure]
    if config.hint_samples and failures and not any(b.success for b in branches + found):
        seeds = range(config.samples, config.samples + config.hint_samples)
        said = feedback(failures[0].label)
        found += await sources.hinted(state, sampler, said, seeds, scratch, task, config.task_file, decode)
    return found


async def forward_branches(
    config: BranchConfig, state: State, branches: list[Branch], sampler: Sampler, scratch: Scratch, task: Any, decode
) -> tuple[State, list[Branch]] | None:
    """The state one step after the first verified success at `state` that did not end the attempt,
    and replies drawn there (`config.forward_samples`, with repairs and hints as at any state), each
    labelled by running it on that state's files; None when there is no such success."""
    if not config.forward_samples:
        return None
    success = next((b for b in branches if b.success and b.label.kind == OK), None)
    reply = None if success is None else sources.reply_of(success.text, state)
    if reply is None:
        return None
    copy = scratch.copy("forward")
    try:
        after = await next_state(state, reply, copy, task, config.task_file)
    finally:
        shutil.rmtree(copy.parent, ignore_errors=True)
    if after is None:
        return None
    ahead = Scratch(after, task, config.task_file)
    try:
        found = await branch_state(after, sampler, config.forward_samples, ahead, task, config.task_file, decode)
        found = [replace(b, source="forward") for b in found]
        found += await more_branches(config, after, found, sampler, ahead, task, decode)
    finally:
        ahead.close()
    return after, found


def _mark(branch: Branch) -> str:
    return "" if branch.source == "sampled" else f" ({branch.source})"


async def branch_state(
    state: State,
    sampler: Sampler,
    samples: int,
    scratch: Scratch,
    task: Any,
    task_file: Path,
    decode: Callable[[list[int]], str],
) -> list[Branch]:
    """K replies at `state` (seeds 0..K-1), one after another so the model computes their shared
    prompt once, each labelled on its own copy of the state's files."""
    found = []
    for seed in range(samples):
        reply = await sampler.sample(state, seed)
        copy = scratch.copy(f"branch-{seed}")
        try:
            label = await label_reply(state, reply, copy, task, task_file, sampler.cap)
        finally:
            shutil.rmtree(copy.parent, ignore_errors=True)
        ids = reply.completion_token_ids
        found.append(
            Branch(
                seed=seed,
                label=label,
                prompt=reply.rendered_messages,
                text=sources.text_of(reply, decode),
                prompt_ids=reply.prompt_token_ids,
                completion_ids=ids,
                ended=reply.completion_tokens < sampler.cap,  # at the cap, the engine stops before an end of turn
            )
        )
    return found


def vocabulary(model: str) -> Callable[[list[int]], str]:
    """Token ids -> the text they spell in `model`'s vocabulary (only the vocabulary is loaded)."""
    if model.startswith("scripted/"):
        return _no_vocabulary
    from llama_cpp import Llama
    from llama_cpp._utils import suppress_stdout_stderr

    from agent.providers.llama_engine import check_runtime

    path = check_runtime(model.removeprefix("local/"))
    with suppress_stdout_stderr(disable=False):  # llama.cpp warns about the context a vocabulary never uses
        vocab = Llama(model_path=str(path), vocab_only=True, verbose=False)
    return lambda ids: vocab.detokenize(ids, special=True).decode("utf-8", "replace")


def _no_vocabulary(ids: list[int]) -> str:
    raise StateError(
        "a scripted model has no vocabulary to decode sampled token ids with: "
        "leave `completion` out of its turns' token_ids (its calls are then written as text)"
    )


def render_summary(result: BranchResult) -> str:
    labels = ", ".join(f"{kind} {n}" for kind, n in result.labels.most_common()) or "none"
    files = ", ".join(f"{result.paths[k].name} {result.records[k]}" for k in KINDS)
    return "\n".join(
        [
            f"{result.states} states, {result.samples} samples in {result.wall_s:.0f} s",
            f"labels: {labels}",
            "verified successes by source: "
            + (", ".join(f"{source} {n}" for source, n in result.sources.most_common()) or "none"),
            f"records: {files}" + (f"; {result.redactions} secrets redacted" if result.redactions else ""),
            f"in {result.paths['sft'].parent}" if result.paths else "",
        ]
    ).rstrip()
