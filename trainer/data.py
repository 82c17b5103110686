"""Training examples from `sdpo` export files and branch records, and the order they are trained in.

Each `teachback-sdpo-*` record (`teachback export --format sdpo`) and each `teachback-branch-*`
record (`teachback tasks branch`: replies sampled at recorded states and labelled by running them)
is rendered once (trainer.render) into the token ids the model saw.
The order is seeded: the sessions are shuffled, and the pairs of a session stay together in their
recorded order, because consecutive pairs of a session share their prompt up to the last turn and
the frozen teacher's keys and values for it are computed only once (trainer.scoring.PrefixCache).
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainer.render import BRANCH_PREFIX, Rendered, RenderError, is_branch, render, render_branch

log = logging.getLogger(__name__)

FORMAT_PREFIX = "teachback-sdpo-"
NEEDS_CORRECTION = ("sft", "dpo")
NEEDS_FAILURE = ("sdpo", "dpo", "mix")


class TrainError(Exception):
    """Training cannot run as asked; the message says how to fix it."""


@dataclass(frozen=True)
class Example:
    id: str
    session_id: str
    rendered: Rendered
    completion: list[int]  # the failed reply's tokens, cut to the completion limit (none for an sft branch)
    sampler_logprobs: list[float] | None  # the sampler's log-probabilities of those tokens
    chosen: list[int] | None  # the correction's tokens, cut to the completion limit
    rejected: list[int] | None = None  # the failed reply's tokens as `chosen`'s were made, cut likewise
    distil: bool = True  # False: the gap filter left out its distillation term (mix keeps its sft term)


@dataclass
class Loaded:
    examples: list[Example]
    left_out: Counter[str] = field(default_factory=Counter)  # records not trained on, by reason


def read_records(paths: list[Path]) -> list[dict[str, Any]]:
    """The records of JSONL files, refusing any that is neither an `sdpo` export nor a branch record."""
    records = []
    for path in paths:
        if not path.is_file():
            raise TrainError(f"no data file at {path}: export one with `teachback export --format sdpo --out FILE`.")
        with path.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except ValueError as exc:
                    raise TrainError(
                        f"{path}:{number} is not JSON ({exc}); pass the JSONL file an export wrote."
                    ) from exc
                kind = str(record.get("format", ""))
                if not kind.startswith((FORMAT_PREFIX, BRANCH_PREFIX)):
                    raise TrainError(
                        f"{path}:{number} is a {kind or 'record without a format'}, not an sdpo record: "
                        "the trainer reads `teachback export --format sdpo` files (every objective does) "
                        "and the files `teachback tasks branch` writes."
                    )
                records.append(record)
    if not records:
        raise TrainError(f"no records in {', '.join(map(str, paths))}: record sessions and export them first.")
    return records


def data_hash(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.read_bytes())
    return f"sha256:{digest.hexdigest()}"


def load_examples(
    records: list[dict[str, Any]], tokenizer: Any, *, objective: str, hint: str, max_completion_tokens: int
) -> Loaded:
    loaded = Loaded([])
    for record in records:
        try:
            rendered = render_branch(record, tokenizer) if is_branch(record) else render(record, tokenizer, hint)
        except RenderError as exc:
            loaded.left_out[str(exc)] += 1
            continue
        if objective in NEEDS_CORRECTION and rendered.chosen is None:
            loaded.left_out["no correction that fits the prompt"] += 1
            continue
        if objective in NEEDS_FAILURE and not rendered.completion:
            loaded.left_out["no failed reply (a verified success: train it with --objective sft)"] += 1
            continue
        logprobs = rendered.sampler_logprobs
        loaded.examples.append(
            Example(
                id=str(record.get("id")),
                session_id=str(record.get("session_id")),
                rendered=rendered,
                completion=rendered.completion[:max_completion_tokens],
                sampler_logprobs=None if logprobs is None else logprobs[:max_completion_tokens],
                chosen=None if rendered.chosen is None else rendered.chosen[:max_completion_tokens],
                rejected=None if rendered.rejected is None else rendered.rejected[:max_completion_tokens],
            )
        )
    if not loaded.examples:
        reasons = ", ".join(f"{n} {reason}" for reason, n in loaded.left_out.most_common()) or "none"
        advice = " Train --objective sdpo, which needs no correction." if objective in NEEDS_CORRECTION else ""
        raise TrainError(f"no record can be trained with --objective {objective} (left out: {reasons}).{advice}")
    for reason, n in loaded.left_out.items():
        log.warning("%d records left out: %s", n, reason)
    return loaded


def epoch_order(examples: list[Example], seed: int, epoch: int) -> list[Example]:
    """Sessions in a seeded order, each session's pairs together in their recorded order."""
    sessions: dict[str, list[Example]] = {}
    for example in examples:
        sessions.setdefault(example.session_id, []).append(example)
    names = sorted(sessions)
    random.Random(f"{seed}:{epoch}").shuffle(names)
    return [example for name in names for example in sessions[name]]


def stream(examples: list[Example], seed: int) -> Iterator[Example]:
    """Epoch after epoch, each in its own seeded order."""
    epoch = 0
    while True:
        yield from epoch_order(examples, seed, epoch)
        epoch += 1
