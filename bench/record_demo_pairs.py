"""Record the trainer tests' demo pairs (tests/train/data/demo_pairs.jsonl): one session of the
embedded model (local/smollm2, grammar mode, seeded) on a two-module project, exported as sdpo.

The project is small (textkit/slug.py, textkit/words.py and their tests) and slugify does not
lowercase, so the model has something to look for. The file needs at least one pair with a
correction (a call that succeeded after the failure) for the dpo and sft objectives to train on;
the script says so and exits 1 when the seed gave none (try another --seed). The model mostly calls
finish at once: of seeds 0-19 at temperature 0.8, only 11 (the default) gave a corrected pair. Seeded
requests sample the same replies again, so the default run writes the same records (ids and times
aside).

    .venv/bin/python bench/record_demo_pairs.py [--seed 11] [--out tests/train/data/demo_pairs.jsonl]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent.config import Settings  # noqa: E402
from agent.protocol import UserInput  # noqa: E402
from agent.runtime import open_session  # noqa: E402
from feedback_store import Recorder, open_store  # noqa: E402
from feedback_store.export.export import export  # noqa: E402

INSTRUCTION = "slugify in textkit/slug.py must return a lowercase slug. Fix it."
FILES = {
    "textkit/__init__.py": '"""textkit: small text helpers."""\n\nfrom textkit.slug import slugify\n'
    'from textkit.words import word_count\n\n__all__ = ["slugify", "word_count"]\n',
    "textkit/slug.py": 'def slugify(title):\n    """The title as a URL slug: its words joined with hyphens, lowercase."""\n'
    '    return "-".join(title.split())\n',
    "textkit/words.py": 'def word_count(text):\n    """The number of words in text."""\n    return len(text.split())\n',
    "tests/test_slug.py": "from textkit import slugify\n\n\ndef test_joins_words_with_hyphens():\n"
    '    assert slugify("big red dog") == "big-red-dog"\n\n\ndef test_lowercases():\n'
    '    assert slugify("Big Red Dog") == "big-red-dog"\n',
    "tests/test_words.py": "from textkit import word_count\n\n\ndef test_counts_words():\n"
    '    assert word_count("one two three") == 3\n\n\ndef test_empty_text_has_no_words():\n'
    '    assert word_count("") == 0\n',
}


def make_project(root: Path) -> Path:
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    for args in (
        ["init", "-q", "-b", "main"],
        ["add", "-A"],
        ["-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "-m", "textkit"],
    ):
        subprocess.run(["git", *args], cwd=root, check=True)
    return root


async def record(project: Path, db: Path, args: argparse.Namespace) -> None:
    settings = Settings(
        model="local/smollm2",
        approval="full-auto",
        max_steps=args.max_steps,
        seed=args.seed,
        temperature=args.temperature,
        lessons=False,
        db=str(db),
    )
    store = open_store(db)
    session = open_session(project, settings, frontend="bench")
    session.subscribe(Recorder(store))
    finished = await session.run(UserInput(text=INSTRUCTION))
    print(f"turn: {finished.reason} after {finished.steps} steps {finished.summary or ''}", file=sys.stderr)
    arguments: dict[str, str] = {}
    for event in store.events(session.id):
        if event["type"] == "tool_call_started":
            arguments[event["call_id"]] = event["arguments"]
        elif event["type"] == "tool_call_finished":
            status = "ok" if event["ok"] else "error"
            call = f"{event['name']}({arguments.get(event['call_id'], '')})"
            print(f"{status:5} {event.get('error_kind') or '':18} {call}", file=sys.stderr)
    store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--max-steps", type=int, default=8)
    parser.add_argument("--temperature", type=float, default=0.8, help="as the learning bench samples")
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "train" / "data" / "demo_pairs.jsonl")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="teachback-demo-") as scratch:
        project = make_project(Path(scratch) / "textkit")
        db = Path(scratch) / "feedback.db"
        asyncio.run(record(project, db, args))
        out = Path(scratch) / "demo_pairs.jsonl"
        if not open_store(db).count_pairs():
            print(f"seed {args.seed}: the model made no mistake; try another --seed", file=sys.stderr)
            return 1
        result = export([db], "sdpo", out, tokenizer="estimate")
        records = [json.loads(line) for line in out.read_text().splitlines()]
        for r in records:
            print(f"{r['source']:6} {r['error_kind']:18} chosen: {r['chosen_left_out'] or 'yes'}", file=sys.stderr)
        print(f"{result.records} records; left out: {result.left_out or 'none'}", file=sys.stderr)
        if not any(r["chosen"] for r in records):
            print(f"seed {args.seed}: no pair has a correction; try another --seed", file=sys.stderr)
            return 1
        args.out.write_text(out.read_text())
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
