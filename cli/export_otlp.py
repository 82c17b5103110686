"""`teachback export --otlp ENDPOINT`: recorded sessions sent to a trace tool as OpenTelemetry spans."""

from __future__ import annotations

import argparse
import sys

from agent.config import otlp_endpoint_problem
from cli.options import EXIT_USAGE, configured_db

EXIT_NOT_SENT = 1


def export_otlp_main(args: argparse.Namespace) -> int:
    from feedback_store.errors import StoreError
    from feedback_store.otel.export import export_otlp
    from feedback_store.otel.send import OtlpUnavailable

    problem = otlp_endpoint_problem(args.otlp)
    if problem:
        print(f"teachback export: --otlp {problem}", file=sys.stderr)
        return EXIT_USAGE
    ignored = [flag for flag, value in (("--format", args.format), ("--out", args.out), ("--hub", args.hub)) if value]
    if ignored:
        print(f"teachback export: {', '.join(ignored)} do nothing with --otlp; leave them out.", file=sys.stderr)
        return EXIT_USAGE
    try:
        result = export_otlp(
            args.db or [configured_db()],
            args.otlp,
            redact=not args.no_redact,
            content=args.otlp_content,
            include_flagged=args.include_flagged,
            shared_only=args.shared_only,
            model=args.model,
            since=args.since,
        )
    except OtlpUnavailable as exc:
        print(f"teachback export: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except StoreError as exc:
        print(f"teachback export: {exc}", file=sys.stderr)
        return EXIT_NOT_SENT
    delivery = result.delivery
    content = "with messages and arguments" if args.otlp_content else "without message or argument text"
    print(
        f"Sent {result.sessions} session(s) as OpenTelemetry spans, {content}, with {result.verdicts} "
        f"evaluation result(s): {delivery.summary()}."
    )
    if result.left_out:
        print("Left out: " + "; ".join(f"{n} {reason}" for reason, n in sorted(result.left_out.items())) + ".")
    if delivery.dropped:
        print(
            f"teachback export: the receiver at {delivery.url} did not take {delivery.dropped} span(s); "
            "check that it is running and takes OTLP/HTTP protobuf, then send again.",
            file=sys.stderr,
        )
        return EXIT_NOT_SENT
    return 0
