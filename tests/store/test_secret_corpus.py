"""Recall and false positives of redaction, measured on generated data.

Recall: every credential kind of tests/store/secret_corpus.py (built from the public formats with
random values, never from the rule file; passwords a person made up, under names that say they are
passwords) in every context a transcript carries it: plainly, in name/value lists, and as base64,
percent-encoded and `\\u`-escaped copies. False
positives: this Python's own standard library (ordinary code), hex hashes, UUIDs, base64 data and
the content hashes and commit ids teachback itself writes.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import sysconfig
import uuid
from collections import defaultdict
from pathlib import Path

from feedback_store.redaction.redactor import Redactor
from tests.store.secret_contexts import CONTEXTS
from tests.store.secret_corpus import KINDS, Case, cases
from tests.store.secret_passwords import person_password

MIN_KINDS = 70
RECALL = 0.99
MAX_FALSE_PER_10K_LINES = 1.0
MIN_STDLIB_LINES = 50_000


def leaked(text: str, case: Case, window: int = 16) -> bool:
    """Whether any part of a secret (any `window` characters of it) survived."""
    text = case.reader(text) if case.reader else text
    for secret in case.secrets:
        n = min(window, len(secret))
        if any(secret[i : i + n] in text for i in range(len(secret) - n + 1)):
            return True
    return False


def recall_table(seed: int) -> tuple[dict[str, list[int]], dict[str, list[int]], list[Case]]:
    by_context: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # [cases, leaked]
    by_kind: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    leaks = []
    redactor = Redactor(env={})
    for case in cases(seed=seed, samples=2):
        out = redactor.redact(case.text)
        bad = leaked(out, case)
        if case.context.startswith("json") or _is_json(case.text):
            json.loads(out)  # redaction keeps JSON-escaped text valid
        for table, key in ((by_context, case.context), (by_kind, case.kind)):
            table[key][0] += 1
            table[key][1] += bad
        if bad:
            leaks.append(case)
    return by_context, by_kind, leaks


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def report(table: dict[str, list[int]]) -> str:
    return "\n".join(f"  {key:<28} {1 - bad / n:7.2%}  ({n - bad}/{n})" for key, (n, bad) in sorted(table.items()))


def test_corpus_covers_the_kinds_and_contexts() -> None:
    assert len({kind.name for kind in KINDS}) == len(KINDS) >= MIN_KINDS
    seen = {(case.kind, case.context) for case in cases(seed=0, samples=1)}
    assert {context for _, context in seen} == set(CONTEXTS)
    for kind in KINDS:  # every kind in every context that does not need its own shape or a header
        assert {c for k, c in seen if k == kind.name} >= set(CONTEXTS) - {"curl", "bare", "json_raw"}, kind.name


def test_corpus_has_made_up_passwords_under_every_password_word() -> None:
    made_up = [kind for kind in KINDS if kind.make is person_password]
    names = " ".join(kind.env.lower() for kind in made_up)
    assert len(made_up) >= 10 and all(word in names for word in ("password", "passwd", "pwd", "pass", "secret"))


def test_recall_per_context_and_kind() -> None:
    for seed in (1, 2):
        by_context, by_kind, leaks = recall_table(seed)
        total = sum(n for n, _ in by_context.values())
        recall = 1 - sum(bad for _, bad in by_context.values()) / total
        print(
            f"\nseed {seed}: recall {recall:.2%} over {total} cases, {len(by_kind)} kinds\nby context:\n"
            f"{report(by_context)}\nkinds with a leak:\n{report({k: v for k, v in by_kind.items() if v[1]})}"
        )
        sample = "\n".join(f"{c.kind} / {c.context}:\n{c.text[:300]}" for c in leaks[:5])
        assert recall >= RECALL, f"recall {recall:.2%}; first leaks:\n{sample}"
        for context, (n, bad) in by_context.items():
            assert 1 - bad / n >= RECALL, (context, report(by_context), sample)
        for kind, (n, bad) in by_kind.items():
            assert 1 - bad / n >= 0.9, (kind, sample)


def stdlib_sample() -> list[Path]:
    """Every other module of the standard library outside its tests, in a fixed order."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(
        p
        for p in root.rglob("*.py")
        if not {"site-packages", "test", "tests", "idle_test"} & set(p.relative_to(root).parts)
    )
    return files[::2]


def test_false_positives_on_ordinary_code() -> None:
    redactor = Redactor(env={})
    lines, hits = 0, []
    for path in stdlib_sample():
        text = path.read_text(encoding="utf-8", errors="replace")
        lines += text.count("\n")
        out = redactor.redact(text)
        if out != text:
            hits += [(path.name, a) for a, b in zip(text.splitlines(), out.splitlines()) if a != b]
    rate = redactor.total / lines * 10_000
    print(f"\n{lines} lines of standard library code: {redactor.total} redactions, {rate:.2f} per 10,000 lines")
    assert lines >= MIN_STDLIB_LINES
    assert rate <= MAX_FALSE_PER_10K_LINES, hits[:20]


def hashes_uuids_base64(rng: random.Random) -> str:
    lines = []
    for i in range(300):
        sha1 = hashlib.sha1(rng.randbytes(8)).hexdigest()
        sha256 = hashlib.sha256(rng.randbytes(8)).hexdigest()
        ident = uuid.UUID(int=rng.getrandbits(128), version=4)
        data = base64.b64encode(rng.randbytes(rng.randrange(12, 90))).decode()
        lines += [
            f"commit {sha1}",
            f"{sha1[:7]} Fix the parser ({i})",
            f'checksum = "{sha256}"',
            f'    "sha256": "{sha256}",',
            f"sha256:{sha256}  dist/teachback-0.1.{i}.tar.gz",
            f'request_id = "{ident}"',
            f'{{"session_id": "{ident}", "event_id": "{uuid.UUID(int=rng.getrandbits(128))}"}}',
            f'PAYLOAD = "{data}"',
            f"    self.assertEqual(base64.b64encode(raw), b'{data}')",
            data[:76],
            f"image/png;base64,{data}",
            f"git diff {sha1[:12]}..{sha1[-12:]} -- src/",
        ]
    return "\n".join(lines) + "\n"


def teachback_record(rng: random.Random) -> dict:
    """Hashes and ids as teachback's own exports and checkpoints write them."""
    digest = hashlib.sha256(rng.randbytes(16)).hexdigest()
    return {
        "format": "teachback-sdpo-1",
        "id": str(uuid.UUID(int=rng.getrandbits(128))),
        "content_key": f"sha256:{digest}",
        "tools_hash": f"sha256:{digest[::-1]}",
        "metadata": {
            "git_head": hashlib.sha1(rng.randbytes(8)).hexdigest(),
            "commit": hashlib.sha1(rng.randbytes(9)).hexdigest(),
            "prompt_tokens": 1834,
            "token_logprobs_key": f"sha256:{digest[1:]}0",
        },
    }


def test_hashes_uuids_and_base64_data_are_left_alone() -> None:
    rng = random.Random(7)
    redactor = Redactor(env={})
    text = hashes_uuids_base64(rng)
    out = redactor.redact(text)
    lines = text.count("\n")
    assert redactor.total / lines * 10_000 <= MAX_FALSE_PER_10K_LINES, [
        (a, b) for a, b in zip(text.splitlines(), out.splitlines()) if a != b
    ][:10]
    records = [teachback_record(rng) for _ in range(200)]
    assert redactor.redact_value(records) == records
    assert redactor.redact(json.dumps(records)) == json.dumps(records)
