"""Redaction throughput (MB/s) beside one plain regex pass, with recall and false positives.

    .venv/bin/python bench/redact_bench.py [--mb 4] [--repeat 5] [--json]

Builds about --mb megabytes of transcript-like messages from this Python's standard library
(`read_file` results with line numbers, search hits, diffs, `edit_file` arguments as JSON, test
output), with a credential from the generated corpus in one message of fifty. Then, in rounds
that run each of these once in turn (so a change in the machine's load falls on all of them), the
median of each printed, timed by this process's CPU time (other processes' load counts little):
- redact: `Redactor.redact` over every message;
- plain re.sub: one `re.sub` of a single token pattern over the same messages (the floor any
  regex-based redaction pays once per rule); the ratio is the median of the rounds' ratios;
- without hyperscan: `Redactor.redact` with each rule's keywords looked for on their
  own and every rule with only a prefilter tried (as on a text that is not ASCII, or without
  hyperscan);
and, in the same run: recall over the generated corpus (every kind in every context; also per
family: written plainly, name/value lists, encoded copies, passwords a person made up) and false
positives per 10,000 lines over half the standard library and over hashes, UUIDs and base64 data.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from feedback_store.redaction import prefilter  # noqa: E402
from feedback_store.redaction.redactor import Redactor  # noqa: E402
from tests.store import secret_contexts  # noqa: E402
from tests.store.secret_corpus import KINDS, cases  # noqa: E402
from tests.store.secret_passwords import person_password  # noqa: E402
from tests.store.test_secret_corpus import hashes_uuids_base64, leaked, stdlib_sample  # noqa: E402

PLAIN = re.compile(r"sk-[A-Za-z0-9_\-]{20,}")
FAMILIES = {
    "written plainly": secret_contexts.PLAIN + secret_contexts.SHAPED,
    "name/value lists": secret_contexts.NAME_VALUE,
    "encoded copies": secret_contexts.ENCODED,
}


def numbered(path: str, lines: list[str], first: int) -> str:
    width = len(str(first + len(lines)))
    body = "".join(f"{first + i:>{width}}| {line}\n" for i, line in enumerate(lines))
    return f"{path} (lines {first}-{first + len(lines) - 1})\n{body}"


def message(rng: random.Random, name: str, lines: list[str]) -> str:
    start = rng.randrange(max(1, len(lines) - 60))
    chunk = lines[start : start + rng.randrange(10, 60)] or ["pass"]
    form = rng.randrange(5)
    if form == 0:
        return numbered(name, chunk, start + 1)
    if form == 1:
        return "\n".join(f"{name}:{start + i + 1}: {line}" for i, line in enumerate(chunk) if line.strip())
    if form == 2:
        return f"--- a/{name}\n+++ b/{name}\n@@ -{start},9 +{start},9 @@\n" + "\n".join(
            ("-" if i % 7 == 3 else "+" if i % 7 == 4 else " ") + line for i, line in enumerate(chunk)
        )
    if form == 3:
        return json.dumps({"path": name, "old_text": "\n".join(chunk[:5]), "new_text": "\n".join(chunk[:6])})
    return (
        f"$ python -m pytest -q tests/test_{Path(name).stem}.py\n"
        + "." * rng.randrange(5, 60)
        + f"F\nFAILED tests/test_{Path(name).stem}.py::test_case - AssertionError\n"
        + "\n".join(chunk[:12])
    )


def transcript(megabytes: float, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    sources = [(p.name, p.read_text(encoding="utf-8", errors="replace").splitlines()) for p in stdlib_sample()]
    secrets = [case.text for case in cases(seed=seed, samples=1)]
    messages, size = [], 0
    while size < megabytes * 1e6:
        text = message(rng, *rng.choice(sources))
        if rng.random() < 0.02:
            text += "\n" + rng.choice(secrets)
        messages.append(text)
        size += len(text)
    return messages


def timed_rounds(arms: dict[str, Callable[[], object]], repeat: int) -> dict[str, list[float]]:
    """Each arm's CPU times, the arms run once each in every round."""
    times: dict[str, list[float]] = {name: [] for name in arms}
    for _ in range(repeat):
        for name, fn in arms.items():
            start = time.process_time()
            fn()
            times[name].append(time.process_time() - start)
    return times


def recall() -> tuple[float, int, int, dict[str, float]]:
    """Recall over the corpus, and over each family of its cases."""
    redactor, total, bad = Redactor(env={}), 0, 0
    kinds = set()
    made_up = {kind.name for kind in KINDS if kind.make is person_password}
    families: dict[str, list[int]] = {}  # [cases, leaked]
    for case in cases(seed=1, samples=2):
        leak = leaked(redactor.redact(case.text), case)
        total += 1
        bad += leak
        kinds.add(case.kind)
        family = next(name for name, contexts in FAMILIES.items() if case.context in contexts)
        for name in (family, "made-up passwords") if case.kind in made_up else (family,):
            counts = families.setdefault(name, [0, 0])
            counts[0] += 1
            counts[1] += leak
    return 1 - bad / total, total, len(kinds), {name: 1 - b / n for name, (n, b) in families.items()}


def false_positives() -> tuple[float, int, float, int]:
    redactor, lines = Redactor(env={}), 0
    for path in stdlib_sample():
        text = path.read_text(encoding="utf-8", errors="replace")
        lines += text.count("\n")
        redactor.redact(text)
    code_rate = redactor.total / lines * 10_000
    data = hashes_uuids_base64(random.Random(7))
    data_redactor = Redactor(env={})
    data_redactor.redact(data)
    data_lines = data.count("\n")
    return code_rate, lines, data_redactor.total / data_lines * 10_000, data_lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=4.0)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="end with one JSON object of the figures")
    args = parser.parse_args()
    messages = transcript(args.mb)
    megabytes = sum(map(len, messages)) / 1e6
    redactor = Redactor(env={})
    hyperscan, prefilter.hyperscan = prefilter.hyperscan, None
    alone = Redactor(env={})
    prefilter.hyperscan = hyperscan
    times = timed_rounds(
        {
            "redact": lambda: [redactor.redact(m) for m in messages],
            "plain": lambda: [PLAIN.sub("[REDACTED]", m) for m in messages],
            "fallback": lambda: [alone.redact(m) for m in messages],
        },
        args.repeat,
    )
    redact, plain, fallback = (statistics.median(times[name]) for name in ("redact", "plain", "fallback"))
    ratio = statistics.median(r / p for r, p in zip(times["redact"], times["plain"]))
    found = Redactor(env={})
    for m in messages:
        found.redact(m)
    print(
        f"transcript: {len(messages)} messages, {megabytes:.1f} MB, {found.total} secrets redacted "
        f"(medians of {args.repeat})"
    )
    print(f"  redact        {megabytes / redact:8.1f} MB/s")
    print(f"  plain re.sub  {megabytes / plain:8.1f} MB/s")
    print(f"  ratio         {ratio:8.1f}x the time of one plain pass")
    print(f"  without hyperscan {megabytes / fallback:4.1f} MB/s ({fallback / redact:.1f}x the time)")
    rate, total, kinds, families = recall()
    print(f"recall: {rate:.2%} over {total} cases ({kinds} kinds, every context)")
    print("  " + ", ".join(f"{name} {value:.2%}" for name, value in families.items()))
    code_rate, lines, data_rate, data_lines = false_positives()
    print(
        f"false positives: {code_rate:.2f} per 10,000 lines of standard library code ({lines} lines); "
        f"{data_rate:.2f} per 10,000 lines of hashes, UUIDs and base64 ({data_lines} lines)"
    )
    if args.json:
        figures = {
            "mb_per_s": megabytes / redact,
            "plain_mb_per_s": megabytes / plain,
            "time_vs_plain": ratio,
            "without_hyperscan_mb_per_s": megabytes / fallback,
            "recall": rate,
            "recall_cases": total,
            "false_positives_per_10k_code_lines": code_rate,
            "false_positives_per_10k_data_lines": data_rate,
            "megabytes": megabytes,
            "repeat": args.repeat,
        }
        print(json.dumps(figures))


if __name__ == "__main__":
    main()
