"""`teachback export` and `teachback stats`: argument wiring and entry points.

The store, the exporters and the model providers load inside the functions, when a command runs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from cli.options import EXIT_USAGE, configured_db
from feedback_store.export.format_table import FORMATS, TRAJECTORIES

TEMPLATES = ("auto", "native", "text")  # feedback_store.export.views.TEMPLATES
EMPTY_EXPORT_EXIT = 2
PROGRESS_MIN_TOTAL = 2000  # pairs; smaller exports finish before a bar would help
BAR_WIDTH = 30
STAGING = ".teachback-staging"


def add_export_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db",
        nargs="+",
        action="extend",
        metavar="PATH",
        help="feedback database(s) to read (default: $TEACHBACK_HOME/feedback.db); "
        "pairs found in several are written once",
    )
    parser.add_argument(
        "--format",
        metavar="FORMAT",
        help=f"output format: {', '.join(FORMATS)}, or {TRAJECTORIES.kind} (whole sessions as ATIF trajectories); "
        "required unless --otlp",
    )
    parser.add_argument(
        "--out",
        metavar="PATH",
        help=f"output file (.jsonl; .parquet for {', '.join(k for k, f in FORMATS.items() if f.parquet)}); "
        "a folder with --hub; for atif, a folder of <session-id>.json files unless PATH ends in .jsonl; "
        "required unless --otlp",
    )
    parser.add_argument(
        "--otlp",
        metavar="ENDPOINT",
        help="send the sessions as OpenTelemetry GenAI spans over OTLP/HTTP to ENDPOINT, a base URL as in "
        "OTEL_EXPORTER_OTLP_ENDPOINT (e.g. http://localhost:4318; spans go to ENDPOINT/v1/traces), "
        "instead of writing a file; the other OTEL_EXPORTER_OTLP_* variables apply",
    )
    parser.add_argument(
        "--otlp-content",
        action="store_true",
        help="with --otlp: send messages, tool arguments and results too (redacted); off by default, so no "
        "prompt or argument text leaves the machine",
    )
    parser.add_argument(
        "--shared-only",
        action="store_true",
        help="only sessions their user shared (teachback share); the dataset card counts what was left out and why",
    )
    parser.add_argument(
        "--hub",
        action="store_true",
        help="write --out as a dataset folder: data/*.parquet and a README card with its YAML header, "
        "as datasets.load_dataset and a dataset hub read it",
    )
    parser.add_argument("--license", default="other", help="the license the --hub card declares (default: other)")
    parser.add_argument("--source", help="only pairs from this source: schema, tool, lint, test, user, hook, monitor")
    parser.add_argument("--since", help="only pairs recorded on or after this date/time (ISO, e.g. 2025-06-01)")
    parser.add_argument("--model", help="only pairs from sessions with this model string")
    parser.add_argument(
        "--test-fraction",
        type=float,
        default=0.0,
        metavar="F",
        help="put this share of sessions in a separate .test file (split by session id)",
    )
    parser.add_argument(
        "--no-redact",
        action="store_true",
        help="do not redact secrets (API keys, tokens, passwords); redaction is on by default",
    )
    parser.add_argument(
        "--include-flagged",
        action="store_true",
        help="include sessions the reward-hacking monitor flagged (left out by default)",
    )
    parser.add_argument(
        "--template",
        choices=TEMPLATES,
        default="auto",
        help="native: OpenAI/Hugging Face tool calls, schemas in a `tools` column (models whose chat "
        "template supports tools); text: tools in the system prompt and calls as text, as "
        "teachback gives models without tool support (SmolLM2); auto (default): text for "
        "sessions whose model was given the text form, native otherwise",
    )
    parser.add_argument(
        "--compact-tools",
        action="store_true",
        help="shorter tool schemas for small models (first sentence of each description, no argument descriptions)",
    )
    parser.add_argument(
        "--max-tokens",
        type=int,
        metavar="N",
        help="leave out records longer than N tokens (prompt, tools and completion)",
    )
    parser.add_argument(
        "--tokenizer",
        metavar="SPEC",
        help="how to count tokens: local/smollm2, a .gguf file, or estimate (4 characters per "
        "token). Default: local/smollm2 when installed and --max-tokens is given, else estimate",
    )


def add_stats_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", metavar="PATH", help="feedback database (default: $TEACHBACK_HOME/feedback.db)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")


def export_command(args: argparse.Namespace) -> int:
    """`teachback export`, with the tokenizer --tokenizer names (or the embedded model's when
    --max-tokens needs exact counts) built here, where the model providers are."""
    if args.otlp is not None:
        from cli.export_otlp import export_otlp_main

        return export_otlp_main(args)
    missing = [flag for flag, value in (("--format", args.format), ("--out", args.out)) if value is None]
    if missing:
        print(
            f"teachback export: {' and '.join(missing)} required (or --otlp ENDPOINT to send OpenTelemetry spans).",
            file=sys.stderr,
        )
        return EXIT_USAGE
    from agent.providers.llama_engine import LocalModelError, token_counter

    try:
        args.counter = token_counter(args.tokenizer, exact=args.max_tokens is not None)
    except LocalModelError as exc:
        print(
            f"teachback export: --tokenizer {args.tokenizer}: {exc} Use local/smollm2, a .gguf path or estimate.",
            file=sys.stderr,
        )
        return 1
    return export_main(args)


def export_main(args: argparse.Namespace) -> int:
    from feedback_store.errors import StoreError
    from feedback_store.export.export import EmptyExport, export

    args.db = args.db or [configured_db()]
    if args.format == TRAJECTORIES.kind or args.hub:
        return export_trajectories_or_hub(args, _command(args))
    bar = ProgressBar()
    try:
        result = export(
            args.db,
            args.format,
            args.out,
            progress=bar,
            command=_command(args),
            **command_line_options(args),
        )
    except StoreError as exc:
        bar.clear()
        print(f"teachback export: {exc}", file=sys.stderr)
        return EMPTY_EXPORT_EXIT if isinstance(exc, EmptyExport) else 1
    bar.clear()
    paths = ", ".join(str(p) for p in result.paths)
    redacted = f"{result.redactions} secrets redacted" if not args.no_redact else "redaction off"
    if result.redacted_kinds:
        redacted += " (" + ", ".join(f"{k}: {n}" for k, n in sorted(result.redacted_kinds.items())) + ")"
    print(f"Wrote {result.records} {args.format} records to {paths}; {redacted}.")
    if result.left_out:
        print("Left out: " + "; ".join(f"{n} {reason}" for reason, n in sorted(result.left_out.items())) + ".")
    for line in result.length_lines:
        print(line)
    print(f"Dataset card: {result.card}")
    for warning in result.warnings:
        print(f"teachback export: warning: {warning}", file=sys.stderr)
    return 0


def command_line_options(args: Any) -> dict[str, Any]:
    """export()'s filters and options as `teachback export` parsed them."""
    return dict(
        redact=not args.no_redact,
        include_flagged=args.include_flagged,
        source=args.source,
        since=args.since,
        model=args.model,
        test_fraction=args.test_fraction,
        template=args.template,
        compact_tools=args.compact_tools,
        max_tokens=args.max_tokens,
        tokenizer=getattr(args, "counter", None) or args.tokenizer,
        shared_only=args.shared_only,
    )


def _staged_file(staged: Path, fmt: str) -> Path:
    form = FORMATS.get(fmt)  # an unknown format is export's to report
    return staged.with_suffix(form.suffix) if form is not None and form.parquet else staged


def export_trajectories_or_hub(args: argparse.Namespace, command: str) -> int:
    from feedback_store.errors import StoreError
    from feedback_store.export.atif import export_atif
    from feedback_store.export.export import export
    from feedback_store.export.hub import write_hub

    out = Path(args.out).expanduser()
    staged = out / STAGING / f"{args.format}.jsonl" if args.hub else out
    new_folder = args.hub and not os.path.lexists(out)  # made for this export: taken back if it fails
    try:
        if args.format == TRAJECTORIES.kind:
            count, left, path, card = export_atif(
                args.db,
                staged,
                redact=not args.no_redact,
                include_flagged=args.include_flagged,
                shared_only=args.shared_only,
                model=args.model,
                since=args.since,
                command=command,
            )
            paths, splits = [path], {"train": count}
        else:
            result = export(
                args.db,
                args.format,
                _staged_file(staged, args.format),
                command=command,
                **command_line_options(args),
            )
            paths, splits, left, card = result.paths, result.splits, result.left_out, result.card
        if args.hub:
            card = write_hub(out, paths, card, args.format, args.license)
    except StoreError as exc:
        if new_folder and os.path.isdir(out):
            shutil.rmtree(out)
        print(f"teachback export: {exc}", file=sys.stderr)
        return 2 if "Nothing to export" in str(exc) else 1
    finally:
        if args.hub and os.path.isdir(out / STAGING):
            shutil.rmtree(out / STAGING)
    where = out if args.hub else ", ".join(str(p) for p in paths)
    print(f"Wrote {sum(splits.values())} {args.format} records to {where}.")
    if left:
        print("Left out: " + "; ".join(f"{n} {reason}" for reason, n in sorted(left.items())) + ".")
    print(f"Dataset card: {card}")
    return 0


def _command(args: argparse.Namespace) -> str:
    """The export command line, for the dataset card."""
    import shlex

    words = ["teachback", "export", "--format", args.format, "--out", str(args.out)]
    for name in ("source", "since", "model", "max_tokens", "tokenizer"):
        if getattr(args, name) is not None:
            words += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    if args.test_fraction:
        words += ["--test-fraction", str(args.test_fraction)]
    if args.template != "auto":
        words += ["--template", args.template]
    words += [
        flag
        for flag, on in (
            ("--compact-tools", args.compact_tools),
            ("--no-redact", args.no_redact),
            ("--include-flagged", args.include_flagged),
            ("--shared-only", args.shared_only),
            ("--hub", args.hub),
        )
        if on
    ]
    return shlex.join(words)


def stats_main(args: argparse.Namespace) -> int:
    import json

    from feedback_store.errors import StoreError
    from feedback_store.read_only import open_read_only
    from feedback_store.stats import format_stats

    try:
        with open_read_only(args.db or configured_db()) as store:
            stats = store.stats()
    except StoreError as exc:
        print(f"teachback stats: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(stats, indent=2) if args.json else format_stats(stats))
    return 0


class ProgressBar:
    """A one-line progress bar on stderr for long exports."""

    def __init__(self, stream: Any = None) -> None:
        self.stream = stream or sys.stderr
        self.shown = False
        self.last = 0.0

    def __call__(self, done: int, total: int) -> None:
        if total < PROGRESS_MIN_TOTAL:
            return
        now = time.monotonic()
        if done < total and now - self.last < 0.1:
            return
        self.last = now
        filled = int(BAR_WIDTH * done / total)
        self.stream.write(f"\rExporting [{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {done}/{total} pairs")
        self.stream.flush()
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()
            self.shown = False
