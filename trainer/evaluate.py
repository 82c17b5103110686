"""`teachback eval --adapter DIR`: what a trained adapter changed, three ways, in one table and
one JSON file. "Before" is the base model, or the adapter given as the baseline (what `teachback
learn` serves now); "after" is the adapter.

1. Held-out pairs (the export's test split, by session): the mean per-token student->teacher
   divergence on each failed reply (the teacher is the base model with the hint, as in training)
   and the mean log-probability of the failed tokens under the student.
2. Behaviour: the agent served by llama.cpp as it serves users (the adapter converted to GGUF), on
   held-out tasks (`teachback bench`): call-error rate, repeated-error rate, premature-finish rate
   and pass@1, each with a paired percentile bootstrap interval over tasks. Their sessions go to a
   scratch database, so evaluation never becomes training data.
3. Forgetting: the mean per-token log-likelihood of held-out successful turns (the token ids the
   model was fed and sampled, from sessions on the test side of the split) and of a general text
   shipped with the package. Before minus after is what was forgotten (nats per token).
"""

from __future__ import annotations

import json
import logging
import resource
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from agent.config import REPLY_TOKENS

log = logging.getLogger(__name__)

FORMAT = "teachback-eval-1"
TRAIN_META = "teachback_train.json"
TEXT_CHUNK = 512  # tokens per window of the general text
Progress = Callable[[str], None]


class EvalError(Exception):
    """An evaluation that cannot run as asked; the message says how to fix it."""


@dataclass
class EvalConfig:
    adapter: Path
    out: Path  # the JSON file; bench files go in <out stem>-bench/ beside it
    baseline: Path | None = None  # an adapter to compare against; None: the base model
    base: str | None = None  # default: the base the adapter was trained on
    serve: str | None = (
        None  # the GGUF model llama.cpp serves the adapter on (a file or packaged name); default: the base's
    )
    pairs: list[Path] = field(default_factory=list)  # held-out sdpo records; default: the db's test split
    db: Path | None = None  # feedback store for held-out pairs and successful turns
    test_fraction: float = 0.2
    tasks: Path | None = None  # held-out task file; None: the sample suite
    behaviour: bool = True
    attempts: int = 1
    max_steps: int | None = None
    max_time: float | None = None
    parallel: int = 1
    bench_cache: Path | None = None  # keeps the "before" side's attempts per model, reused by later runs
    max_pairs: int = 50
    max_turns: int = 20
    max_completion_tokens: int | None = REPLY_TOKENS
    seed: int = 0
    # Held-out states (a database of task attempts, and which of its sessions): how far the adapter
    # moved there (`shift`, mean KL along their recorded replies).
    states_db: Path | None = None
    states_sessions: frozenset[str] | None = None
    # Judged after the pairs and forgetting: a reason to skip the slow task runs (learn's gate), or None.
    skip_tasks: Callable[[dict[str, Any]], str | None] | None = None


def evaluate(config: EvalConfig, progress: Progress | None = None) -> dict[str, Any]:
    """Run the three evaluations, write the JSON document and return it."""
    say = progress or (lambda text: log.info("%s", text))
    base = config.base if config.base is not None else trained_base(config.adapter)
    doc: dict[str, Any] = {
        "format": FORMAT,
        "adapter": str(config.adapter),
        "baseline": str(config.baseline) if config.baseline else None,
        "base": base,
        "created_at": time.time(),
        "cpu_s": {},
        "wall_s": {},
    }
    from trainer import scoring

    with _stage(doc, "load"):
        after_model, tokenizer = scoring.load(base, config.adapter)
        if config.baseline is not None:
            before_model, _ = scoring.load(base, config.baseline)
        else:  # the base itself: the adapted model with its adapter off, not a second load
            before_model = scoring.AdaptersOff(after_model)
    with _stage(doc, "pairs"):
        say("scoring held-out pairs")
        records = held_out_records(config)
        doc["pairs"] = pair_metrics(before_model, after_model, tokenizer, records, config.max_completion_tokens)
    with _stage(doc, "forgetting"):
        say("measuring forgetting")
        turns = successful_turns(config.db, config.test_fraction, config.max_turns, tokenizer)
        doc["forgetting"] = forgetting(before_model, after_model, tokenizer, turns)
    if config.states_db is not None:
        with _stage(doc, "shift"):
            say("measuring how far the adapter moved at held-out states")
            doc["shift"] = shift(before_model, after_model, state_pieces(config.states_db, config.states_sessions))
    del before_model, after_model
    skip = config.skip_tasks(doc) if config.skip_tasks else None
    if skip:
        doc["behaviour"] = {"note": f"skipped: {skip}"}
    elif config.behaviour:
        with _stage(doc, "behaviour"):
            say("running held-out tasks with and without the adapter")
            from trainer.eval_bench import behaviour

            doc["behaviour"] = behaviour(config, base, say)
    config.out.parent.mkdir(parents=True, exist_ok=True)
    config.out.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return doc


@contextmanager
def _stage(doc: dict[str, Any], name: str) -> Iterator[None]:
    """CPU seconds (this process and its children, e.g. bench workers) and wall seconds of a stage."""
    cpu, wall = _cpu_seconds(), time.perf_counter()
    try:
        yield
    finally:
        doc["cpu_s"][name] = round(_cpu_seconds() - cpu, 1)
        doc["wall_s"][name] = round(time.perf_counter() - wall, 1)


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def trained_base(adapter: Path) -> str | None:
    """The base an adapter directory was trained on: `teachback train` records it; peft's own
    config names the directory it was loaded from."""
    for name, key in ((TRAIN_META, "base"), ("adapter_config.json", "base_model_name_or_path")):
        path = adapter / name
        if path.is_file():
            value = json.loads(path.read_text(encoding="utf-8")).get(key)
            if value:
                return str(value)
    if not (adapter / "adapter_config.json").is_file():
        raise EvalError(
            f"{adapter} is not an adapter directory (no adapter_config.json): give the --out of "
            "`teachback train` or a directory written by peft's save_pretrained."
        )
    return None


# ---------------------------------------------------------------------------------------------
# 1. held-out pairs


def held_out_records(config: EvalConfig) -> list[dict[str, Any]]:
    """The held-out sdpo records: the given files, else the test split exported from the store."""
    paths = list(config.pairs) or _export_test_split(config)
    records = [json.loads(line) for path in paths for line in path.read_text(encoding="utf-8").splitlines() if line]
    wrong = [r.get("format") for r in records if not str(r.get("format", "")).startswith("teachback-sdpo-")]
    if wrong:
        raise EvalError(f"held-out pairs must be sdpo records (teachback export --format sdpo), got {wrong[0]!r}")
    return records[: config.max_pairs]


def _export_test_split(config: EvalConfig) -> list[Path]:
    import tempfile

    from feedback_store.export.export import EmptyExport, export

    if config.db is None or not Path(config.db).exists():
        return []
    folder = Path(tempfile.mkdtemp(prefix="teachback-eval-"))
    try:
        result = export([config.db], "sdpo", folder / "pairs.jsonl", test_fraction=config.test_fraction)
    except EmptyExport:
        return []
    return [p for p in result.paths if p.name.endswith(".test.jsonl")]


def pair_metrics(
    before: Any, after: Any, tokenizer: Any, records: list[dict[str, Any]], max_tokens: int | None
) -> dict[str, Any]:
    from trainer.scoring import score

    if not records:
        return {"pairs": 0, "note": "no held-out pairs: record more sessions, or pass --pairs FILE.test.jsonl"}
    sides = {
        name: score(model, tokenizer, records, max_completion_tokens=max_tokens)
        for name, model in (("before", before), ("after", after))
    }
    tokens = sum(len(s.student) for s in sides["after"])

    def mean(scores: list[Any], pick: Callable[[Any], float]) -> float:
        return sum(pick(s) for s in scores) / max(1, tokens)

    return {
        "pairs": len(sides["after"]),
        "tokens": tokens,
        "divergence": {k: mean(v, lambda s: s.divergence * len(s.student)) for k, v in sides.items()},
        "failed_token_logprob": {k: mean(v, lambda s: sum(s.student)) for k, v in sides.items()},
        "teacher_logprob": mean(sides["after"], lambda s: sum(s.teacher)),
    }


# ---------------------------------------------------------------------------------------------
# 3. forgetting


@dataclass(frozen=True)
class Turn:
    session_id: str
    prompt: list[int]
    completion: list[int]


def successful_turns(db: Path | None, test_fraction: float, limit: int, tokenizer: Any) -> list[Turn]:
    """Replies whose every tool call succeeded, from unflagged sessions on the test side of the
    split (task attempts split by task), as the token ids the model was fed and sampled (newest
    sessions first). Of task attempts only those that solved their task count: a `finish` always
    succeeds as a call, and a premature one is not a turn the adapter should keep."""
    from feedback_store.content.renders import Renders
    from feedback_store.export.export import split_of
    from feedback_store.store import open_store

    if db is None or not Path(db).exists() or limit <= 0:
        return []
    turns: list[Turn] = []
    with open_store(db) as store:
        replies = store.clean_replies()
        renders = Renders(store)
        tasks = store.task_sessions()
        for session_id, seq in replies:
            if len(turns) >= limit:
                break
            task = tasks.get(session_id)
            if split_of(task["instance_id"] if task else session_id, test_fraction) != "test":
                continue
            if task is not None and task.get("reward") != 1.0:
                continue
            render = renders.at(session_id, seq)
            if render is not None and render.completion_token_ids and _same_vocabulary(tokenizer, render):
                turns.append(Turn(session_id, render.prompt_token_ids, render.completion_token_ids))
    return turns


def _same_vocabulary(tokenizer: Any, render: Any) -> bool:
    """The recorded prompt ids are in this tokenizer's vocabulary: they decode to the prompt its
    chat template writes for the messages the model was given (as trainer.render checks). They are
    not always its own encoding of that text, and grammar-constrained replies seldom are."""
    if not render.prompt_token_ids or not render.messages:
        return False
    text = tokenizer.apply_chat_template(render.messages, add_generation_prompt=True, tokenize=False)
    return tokenizer.decode(render.prompt_token_ids) == text


def forgetting(
    before: Any, after: Any, tokenizer: Any, turns: list[Turn], base: dict[str, float | None] | None = None
) -> dict[str, Any]:
    """Mean log-likelihood per token before and after, and the drop, on general text and on `turns`.
    `base`: the before side of an earlier call with the same model and turns (computed once for every arm)."""
    text = resources.files("trainer").joinpath("general_text.txt").read_text(encoding="utf-8")
    ids = tokenizer.encode(text, add_special_tokens=False)
    result: dict[str, Any] = {}
    for name, pieces in (
        ("general_text", _windows(ids)),
        ("successful_turns", [(t.prompt, t.completion) for t in turns]),
    ):
        if not pieces:
            result[name] = {"tokens": 0, "note": "none on the test side of the split with recorded token ids"}
            continue
        known = (base or {}).get(name)
        sides = {"before": _loglik(before, pieces) if known is None else known, "after": _loglik(after, pieces)}
        result[name] = {"tokens": sum(len(c) for _, c in pieces), **sides, "drop": sides["before"] - sides["after"]}
    return result


def _windows(ids: list[int]) -> list[tuple[list[int], list[int]]]:
    """The text as (context, scored) windows: each window's first token only conditions."""
    return [(ids[i : i + 1], ids[i + 1 : i + TEXT_CHUNK]) for i in range(0, len(ids) - 1, TEXT_CHUNK)]


def _loglik(model: Any, pieces: list[tuple[list[int], list[int]]]) -> float:
    """Mean per-token log-likelihood of each piece's tokens after its prompt, prompts that share a
    prefix (turns of one session) computed once."""
    import torch

    from trainer.losses import token_logprobs
    from trainer.scoring import PrefixCache, completion_logits

    cache = PrefixCache(model, adapted=True)
    total, count = 0.0, 0
    for prompt, scored in pieces:
        held = len(prompt) - 1  # the prompt's last token runs with the piece: it predicts the first scored one
        cache.extend(prompt[:held])
        with torch.no_grad():
            logits = completion_logits(model, prompt + scored, len(scored), cache.view(held), held)
        total += float(token_logprobs(logits, torch.tensor(scored)).sum())
        count += len(scored)
    return total / max(1, count)


def state_pieces(db: Path, sessions: frozenset[str] | None, limit: int = 60) -> list[Turn]:
    """Held-out states as (prompt, recorded reply) token ids: the ids llama.cpp was fed and
    sampled, in the vocabulary of the model the sessions ran (give the model trained on it)."""
    from tasks.states import load_states, replayable

    turns = []
    for state in load_states(db):
        if len(turns) >= limit:
            break
        if replayable(state) and state.reply_ids and (sessions is None or state.session_id in sessions):
            turns.append(Turn(state.session_id, list(state.prompt_ids or []), list(state.reply_ids)))
    return turns


def shift(before: Any, after: Any, turns: list[Turn]) -> dict[str, Any]:
    """How far the adapter moved the model where it acts: the mean per-token KL(before || after)
    of the next-token distributions along each held-out state's recorded reply."""
    import torch

    from trainer.losses import divergence
    from trainer.scoring import PrefixCache, completion_logits

    if not turns:
        return {"tokens": 0, "note": "no held-out states with recorded token ids in this vocabulary"}
    caches = {name: PrefixCache(model, adapted=True) for name, model in (("before", before), ("after", after))}
    total, count = 0.0, 0
    for turn in turns:
        held = len(turn.prompt) - 1
        logp = {}
        for name, model in (("before", before), ("after", after)):
            caches[name].extend(turn.prompt[:held])
            with torch.no_grad():
                logits = completion_logits(
                    model, turn.prompt + turn.completion, len(turn.completion), caches[name].view(held), held
                )
            logp[name] = logits.float().log_softmax(-1)
        total += float(divergence(logp["after"], logp["before"], 0.0).sum())  # alpha 0: KL(before || after)
        count += len(turn.completion)
    return {"states": len(turns), "tokens": count, "mean_kl": total / max(1, count)}


# ---------------------------------------------------------------------------------------------
# the table


def render_table(doc: dict[str, Any]) -> str:
    rows: list[tuple[str, str, str, str]] = []
    pairs = doc.get("pairs") or {}
    if pairs.get("pairs"):
        label = f"held-out pairs ({pairs['pairs']}, {pairs['tokens']} tokens)"
        rows.append((f"{label}: divergence student→teacher", *_change(pairs["divergence"], lower=True)))
        # Lower is the aim: the failed reply made less likely.
        rows.append(
            ("held-out pairs: log-prob of the failed tokens", *_change(pairs["failed_token_logprob"], lower=True))
        )
    for key, name in (("general_text", "general text"), ("successful_turns", "held-out successful turns")):
        part = (doc.get("forgetting") or {}).get(key) or {}
        if part.get("tokens") and "before" in part:
            rows.append((f"log-likelihood / token, {name} ({part['tokens']} tokens)", *_change(part)))
    behaviour = doc.get("behaviour") or {}
    for key, name in (
        ("call_error_rate", "call-error rate"),
        ("repeated_error_rate", "repeated-error rate"),
        ("malformed_call_rate", "malformed-call rate"),
        ("premature_finish_rate", "premature-finish rate"),
        ("failing_test_runs_per_attempt", "failing test runs / attempt"),
        ("pass@1", "pass@1"),
    ):
        if key in behaviour.get("rates", {}):
            rate = behaviour["rates"][key]
            ci = rate.get("diff_ci")
            span = f" (95% CI {ci[0]:+.3f} to {ci[1]:+.3f})" if ci else ""
            rows.append(
                (
                    f"held-out tasks: {name}",
                    f"{rate['before']:.3f}",
                    f"{rate['after']:.3f}",
                    f"{rate['after'] - rate['before']:+.3f}{span}",
                )
            )
    if behaviour.get("note"):
        rows.append(("held-out tasks", "", "", behaviour["note"]))
    width = max([len("metric"), *(len(r[0]) for r in rows)])
    lines = [
        f"| {'metric'.ljust(width)} | before | after | change |",
        f"|{'-' * (width + 2)}|-------:|------:|--------|",
    ]
    lines += [f"| {r[0].ljust(width)} | {r[1]} | {r[2]} | {r[3]} |" for r in rows]
    return "\n".join(lines)


def _change(values: dict[str, float], lower: bool = False) -> tuple[str, str, str]:
    diff = values["after"] - values["before"]
    word = "better" if (diff < 0) == lower and diff != 0 else ("worse" if diff != 0 else "same")
    return f"{values['before']:.4f}", f"{values['after']:.4f}", f"{diff:+.4f} ({word})"


def cpu_minutes(doc: dict[str, Any]) -> dict[str, float]:
    return {stage: round(seconds / 60, 2) for stage, seconds in doc.get("cpu_s", {}).items()}
