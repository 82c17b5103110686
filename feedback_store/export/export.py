"""`teachback export`: pairs from one or more databases -> training files in one format.

Pairs are deduplicated (the same content in several databases; near-duplicates within a session:
the same call and feedback once ids and whitespace are normalised), given a correction that fits
their prompt where one can be derived (feedback_store.export.corrections), built into records, redacted
(by default), measured in tokens, split train/test by session (so no conversation lands on both
sides) and written in a deterministic order, with a dataset card beside them. An export that would
write nothing fails with what to change instead of leaving an empty file.
"""

from __future__ import annotations

import hashlib
import heapq
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from feedback_store.content.renders import Renders
from feedback_store.errors import StoreError
from feedback_store.export.card import CardInfo, write_card
from feedback_store.export.corrections import Fit, Workspace, fitting_correction
from feedback_store.export.export_io import (
    OncePerText,
    SessionMessages,
    Sink,
    accepted_edits,
    near_key,
    redact_record,
    scrub_render,
)
from feedback_store.export.format_table import FORMATS, Format
from feedback_store.export.formats import Example, Left, Options, session_canonical, template_of
from feedback_store.export.lengths import LengthReport, TokenCounter, counter_of
from feedback_store.export.unroot import Unrooted, unrooted
from feedback_store.export.views import TEMPLATES, Memo
from feedback_store.read_only import open_read_only
from feedback_store.redaction.redactor import Redactor
from feedback_store.rows import Pair
from feedback_store.store import Store
from feedback_store.team.provenance import Origins, content_key
from feedback_store.team.sharing import resolve

Progress = Callable[[int, int], None]
PROGRESS_EVERY = 1000
ENCODED_LIMIT = 20_000  # JSON texts of a session's dicts kept for its later records (a few KB each)

__all__ = ["FORMATS", "EmptyExport", "ExportResult", "export", "split_of"]


class EmptyExport(StoreError):
    """The selection gave no record; the message says what to change."""


@dataclass(frozen=True)
class ExportResult:
    records: int  # records written (all splits)
    redactions: int  # secrets replaced
    paths: list[Path]  # files written (an empty split is not written)
    redacted_kinds: dict[str, int] = field(default_factory=dict)
    duplicates: int = 0  # pairs skipped because another database held the same content
    splits: dict[str, int] = field(default_factory=dict)  # records per split
    near_duplicates: int = 0  # pairs skipped: the same call and feedback earlier in the session
    left_out: dict[str, int] = field(default_factory=dict)  # pairs or records not written, by reason
    lengths: dict[str, Any] = field(default_factory=dict)
    length_lines: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    card: Path | None = None


def split_of(session_id: str, test_fraction: float) -> str:
    """'test' or 'train', decided by the hash of a session's id (or of its task's, split_groups):
    stable across runs and machines."""
    if test_fraction <= 0:
        return "train"
    bucket = int.from_bytes(hashlib.sha256(session_id.encode()).digest()[:8], "big") / 2**64
    return "test" if bucket < test_fraction else "train"


def split_groups(stores: Sequence[Store]) -> dict[str, str]:
    """session id -> what it is split by: a task attempt by its task (attempts of one task share their
    first prompt, so a split by session would put training prompts on the test side), any other
    session by itself."""
    return {sid: task["instance_id"] for store in stores for sid, task in store.task_sessions().items()}


@dataclass
class _Tally:
    matched: int = 0
    duplicates: int = 0
    near_duplicates: int = 0
    left_out: Counter[str] = field(default_factory=Counter)
    by_source: Counter[str] = field(default_factory=Counter)
    by_kind: Counter[str] = field(default_factory=Counter)
    templates: Counter[str] = field(default_factory=Counter)


def export(
    db_paths: Sequence[str | Path],
    fmt: str,
    out_path: str | Path,
    *,
    progress: Progress | None = None,
    redact: bool = True,
    include_flagged: bool = False,
    source: str | None = None,
    since: float | str | None = None,
    model: str | None = None,
    test_fraction: float = 0.0,
    template: str = "auto",
    compact_tools: bool = False,
    max_tokens: int | None = None,
    tokenizer: TokenCounter | str | None = None,
    command: str = "",
    shared_only: bool = False,
) -> ExportResult:
    form = _check(db_paths, fmt, test_fraction, template, max_tokens)
    out = Path(out_path).expanduser()
    names = (
        {"train": out}
        if test_fraction <= 0
        else {
            "train": out.with_name(f"{out.stem}.train{out.suffix}"),
            "test": out.with_name(f"{out.stem}.test{out.suffix}"),
        }
    )
    filters = dict(source=source, since=since, model=model, include_flagged=include_flagged)
    options = Options(template=template, compact_tools=compact_tools)
    redactor = Redactor() if redact else None
    # `tokenizer`: a counter (the command line builds the embedded model's when --max-tokens decides
    # what is left out) or the estimate; the length report says which.
    counter = counter_of(tokenizer)
    report = LengthReport(counter.name, max_tokens)
    tally = _Tally()
    with ExitStack() as stack:
        stores = [stack.enter_context(open_read_only(path)) for path in db_paths]
        scrub = unrooted(redactor, stores)  # the workspace folders as the placeholder root, then redaction
        once = OncePerText(scrub) if redactor else scrub
        sinks = {name: stack.enter_context(Sink(path, form.parquet)) for name, path in names.items()}
        examples = _examples(stores, filters, options, once, tally, progress, form.accepted_edits, shared_only)
        groups = split_groups(stores) if test_fraction > 0 else {}
        _fill(sinks, examples, form, once, counter, report, tally, test_fraction, groups)
        splits = {name: len(sink) for name, sink in sinks.items()}
        if not sum(splits.values()):
            raise EmptyExport(_empty_message(fmt, stores, filters, tally, report))
        warnings = [
            f"the {name} split is empty (its sessions all hashed to the other side); {names[name].name} "
            "was not written. Record more sessions or change --test-fraction."
            for name, n in splits.items()
            if n == 0
        ]
        paths = [sink.path for sink in sinks.values() if len(sink)]
        for sink in sinks.values():
            sink.finish()
        # the card inside the sinks' block: should it fail, the files just written are taken back
        left = dict(tally.left_out)
        if report.over:
            left[f"over --max-tokens {max_tokens}"] = report.over
        if tally.near_duplicates:
            left["near-duplicates (same call and feedback in a session)"] = tally.near_duplicates
        if tally.duplicates:
            left["duplicates (same content in several databases)"] = tally.duplicates
        kinds = dict(redactor.counts) if redactor else {}
        card = write_card(
            out,
            CardInfo(
                fmt=fmt,
                format_name=form.name,
                files={p.name: splits[n] for n, p in names.items() if splits[n]},
                test_fraction=test_fraction,
                template=_templates(template, tally),
                compact_tools=compact_tools,
                redact=redact,
                redacted_kinds=kinds,
                by_source=tally.by_source,
                by_kind=tally.by_kind,
                left_out=left,
                lengths=report.lines(),
                warnings=warnings,
                command=command,
            ),
        )
    return ExportResult(
        records=sum(splits.values()),
        redactions=redactor.total if redactor else 0,
        paths=paths,
        redacted_kinds=kinds,
        duplicates=tally.duplicates,
        splits=splits,
        near_duplicates=tally.near_duplicates,
        left_out=left,
        lengths=report.summary(),
        length_lines=report.lines(),
        warnings=warnings,
        card=card,
    )


def _fill(
    sinks: dict[str, Sink],
    examples: Iterator[Example],
    form: Format,
    redactor: OncePerText | Unrooted | None,
    counter: TokenCounter,
    report: LengthReport,
    tally: _Tally,
    test_fraction: float,
    groups: dict[str, str],
) -> None:
    """Build, redact, measure and write each example's records to its split's sink."""
    session, redacted, measured, encoded = None, Memo(), Memo(), Memo(ENCODED_LIMIT)
    for example in examples:
        if example.pair.session_id != session:  # messages are shared within a session only
            session, redacted, measured, encoded = example.pair.session_id, Memo(), Memo(), Memo(ENCODED_LIMIT)
        built = form.build(example)
        if isinstance(built, Left):
            tally.left_out[built.reason] += 1
            continue
        for record in built:
            record = redact_record(record, redactor, redacted, encoded)
            if not report.admit(record, counter, measured):
                continue
            record["provenance"] = example.provenance  # after redaction: ids and hashes are not secrets
            group = groups.get(example.pair.session_id, example.pair.session_id)
            sinks[split_of(group, test_fraction)].add(record, encoded)
            tally.by_source[example.pair.source] += 1
            tally.by_kind[example.pair.error_kind or "none"] += 1
            tally.templates[template_of(example)] += 1


def _check(
    db_paths: Sequence[str | Path], fmt: str, test_fraction: float, template: str, max_tokens: int | None
) -> Format:
    if fmt not in FORMATS:
        raise StoreError(f"Unknown export format {fmt!r}. Choose one of: {', '.join(FORMATS)}.")
    if not 0 <= test_fraction < 1:
        raise StoreError(f"--test-fraction must be at least 0 and below 1, got {test_fraction}.")
    if template not in TEMPLATES:
        raise StoreError(f"--template must be one of {', '.join(TEMPLATES)}, got {template!r}.")
    if max_tokens is not None and max_tokens < 1:
        raise StoreError(f"--max-tokens must be a positive number of tokens, got {max_tokens}.")
    if not db_paths:
        raise StoreError("No database to export from: pass --db PATH (one or more).")
    form = FORMATS[fmt]
    if form.parquet:
        _require_pyarrow(fmt)
    for path in db_paths:
        if not Path(path).expanduser().is_file():
            raise StoreError(
                f"No feedback database at {path}. Check the path (the default is $TEACHBACK_HOME/feedback.db)."
            )
    return form


def _examples(
    stores: list[Store],
    filters: dict[str, Any],
    options: Options,
    redactor: OncePerText | Unrooted | None,
    tally: _Tally,
    progress: Progress | None,
    with_accepted: bool,
    shared_only: bool = False,
) -> Iterator[Example]:
    """Each distinct pair as an Example: its fitting correction and render, redacted, with where it
    came from. With `shared_only`, pairs of sessions their user has not shared are left out."""
    # Only progress reports need the total, and counting reads every pair once more.
    total = sum(store.count_pairs(**filters) for store in stores) if progress is not None else 0
    workspaces = {id(store): Workspace(store) for store in stores}
    origins = {id(store): Origins(store) for store in stores}
    shares = {id(store): resolve(store.query) for store in stores} if shared_only else {}
    renders = {id(store): Renders(store) for store in stores}
    messages = SessionMessages(redactor)
    seen: set[str] = set()
    near: set[tuple[str, ...]] = set()
    session, memo = None, Memo()
    for store, pair in _merged(stores, filters):
        if pair.session_id != session:
            session, memo = pair.session_id, Memo()
        tally.matched += 1
        if progress is not None and (tally.matched % PROGRESS_EVERY == 0 or tally.matched == total):
            progress(tally.matched, total)
        if shared_only and not shares[id(store)][pair.session_id].shared:
            tally.left_out[shares[id(store)][pair.session_id].reason] += 1
            continue
        key = messages.key(pair)
        if key in seen:
            tally.duplicates += 1
            continue
        seen.add(key)
        near_duplicate = near_key(pair)
        if near_duplicate in near:
            tally.near_duplicates += 1
            continue
        near.add(near_duplicate)
        fit = fitting_correction(workspaces[id(store)], pair, partial(session_canonical, tools=pair.tools, memo=memo))
        render = renders[id(store)].at(pair.session_id, len(pair.prompt))
        clean = messages.scrub(pair)
        yield Example(
            pair=clean,
            fit=fit,
            render=scrub_render(render, pair, clean, redactor),
            fix_ids=_fix_ids(renders[id(store)], pair, fit, redactor),
            options=options,
            memo=memo,
            provenance=origins[id(store)].of(pair.session_id, content_key(key)),
        )
    if with_accepted:
        for store in stores:
            for pair in accepted_edits(store, filters):
                if shared_only and not shares[id(store)][pair.session_id].shared:
                    continue
                render = renders[id(store)].at(pair.session_id, len(pair.prompt))
                clean = messages.scrub(pair)
                yield Example(
                    pair=clean,
                    render=scrub_render(render, pair, clean, redactor),
                    options=options,
                    label=True,
                    provenance=origins[id(store)].of(pair.session_id, content_key(messages.key(pair))),
                )


def _fix_ids(renders: Renders, pair: Pair, fit: Fit, redactor: OncePerText | Unrooted | None) -> list[int] | None:
    """The token ids the model sampled for the fit, when the fit is a whole recorded reply of a
    model whose ids were recorded and redaction leaves its text as it is."""
    if fit.seq is None or fit.message is None:
        return None
    made = renders.at(pair.session_id, fit.seq)
    if made is None or made.completion_token_ids is None:
        return None
    if redactor is not None and redactor.redact_value(fit.message) != fit.message:
        return None  # the ids would still spell the secret out
    return made.completion_token_ids


def _merged(stores: list[Store], filters: dict[str, Any]) -> Iterator[tuple[Store, Pair]]:
    """All stores' pairs in one order that does not depend on the order the databases were given."""

    def tagged(store: Store) -> Iterator[tuple[Store, Pair]]:
        return ((store, pair) for pair in store.iter_pairs(**filters))

    return heapq.merge(
        *(tagged(s) for s in stores), key=lambda sp: (sp[1].session_id, len(sp[1].prompt), sp[1].source, sp[1].id)
    )


def _templates(template: str, tally: _Tally) -> str:
    if template != "auto":
        return template
    return "auto (" + ", ".join(f"{k}: {n} records" for k, n in sorted(tally.templates.items())) + ")"


def _empty_message(fmt: str, stores: list[Store], filters: dict[str, Any], tally: _Tally, report: LengthReport) -> str:
    everything = sum(store.count_pairs() for store in stores)
    used = ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in filters.items() if v not in (None, False))
    lines = [
        f"Nothing to export: no {fmt} record came out of {tally.matched} matching pairs "
        f"({everything} pairs in the database{'s' if len(stores) > 1 else ''}{'; filters: ' + used if used else ''})."
        " No file was written."
    ]
    if not tally.matched:
        lines.append(
            "Change the filters (--source, --since, --model; --include-flagged for flagged sessions) or "
            "record sessions first (teachback run, teachback demo)."
            if everything
            else "The database holds no feedback pairs yet: record sessions first (teachback run, teachback demo)."
        )
    if tally.left_out:
        reasons = ", ".join(f"{n} {r}" for r, n in tally.left_out.most_common())
        lines.append(f"Left out: {reasons}.")
        if FORMATS[fmt].needs_correction:
            lines.append(
                f"{fmt} needs a correction that fits the failed turn's prompt; export sdpo, trl-sdpo or kto, "
                "which keep uncorrected pairs."
            )
    if report.over:
        lines.append(
            f"{report.over} records were over --max-tokens {report.max_tokens}: raise it, or shorten the "
            "records with --compact-tools."
        )
    return " ".join(lines)


def _require_pyarrow(fmt: str) -> None:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise StoreError(
            f"The {fmt} format writes parquet, which needs pyarrow: pip install 'teachback[parquet]'."
        ) from None
