"""Whether redaction gives the same output as at another revision, on many texts.

    .venv/bin/python bench/redact_compare.py [--against HEAD] [--adversarial 12000]

The texts: the redaction bench's transcript, the generated secret corpus, the prefilter tests'
texts (secrets in code, near misses of the dotted tokens, random runs of encoded characters),
corpus texts cut, joined and re-encoded, random strings of credential words, separators and
token pieces, and chunks of this Python's standard library. Each is redacted as text (with
hyperscan choosing the rules, and every tenth also without it) and every tenth as a JSON value,
by the working tree's `feedback_store` and by the one at `--against`, each in a process of its
own; the outputs and the counts must be identical. Exits 1 when they are not.
"""

from __future__ import annotations

import argparse
import base64
import os
import pickle
import random
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV = {"DEPLOY_TOKEN": "Zq8#mW2!pL5x-envvalue", "HOME": "/home/someone", "X_API_KEY": 'a"quoted\\value99'}
PIECES = [
    *"aZ70 \n\t\"'`<>\\%=:/.-_,;()[]{}@",
    *["%41", "%0a", "%2D", "é", "✓", "\\n", "\\t", "\\u0041", "\\x41", "\\\\u0042", "=="],
    *["password", "Password", "PASS", "pwd", "pw", "secret", "SECRET", "token", "api_key", "apiKey", "auth", "key"],
    *["pat", "credential", "Bearer ", "Basic ", "Authorization: ", "://", "user:", "-u ", "--password ", "--token="],
    *["mysql -p", "login x password ", "identified by ", "value: ", '"value": ', "name: ", "<password>", "</"],
    *["_auth=", '"auth": "', "sk-", "ghp_", "AKIA", "xoxb-", "eyJ", "AIza", "hf_", "glpat-", "npm_", "SG.", "key-"],
    *["-us1", "SK", "Q~", "sig=", "abc123.", "k3j9x2", "q8w7e6r5t4y3u2i1", "MTIzNDU2Nzg5MDEyMzQ1Njc4", ".Gh1jK2"],
    *["UEFTU1dPUkQ9", "cGFzc3dvcmQ6", "dXNlcjpwYXNz", "QUtJQUlPU0ZPRE5ON0VYQU1QTEU=", "Falcon1234!maple"],
    *["a1B2c3D4e5F6g7H8i9J0", "0123456789abcdef0123456789abcdef", "LS0tLS1CRUdJTi", "MIIEowIBAAKCAQEA"],
    *["-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----"],
]


def texts(adversarial: int) -> list[str]:
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "bench"))
    from redact_bench import transcript

    from tests.store.secret_corpus import cases
    from tests.store.test_redact_prefilter import corpus_texts, encoded_texts, token_shaped_texts
    from tests.store.test_secret_corpus import hashes_uuids_base64, stdlib_sample

    rng = random.Random(42)
    corpus = [case.text for case in cases(seed=1, samples=2)]
    out = transcript(4.0) + corpus + corpus_texts() + encoded_texts() + token_shaped_texts()
    out += ["".join(rng.choice(PIECES) for _ in range(rng.randrange(1, 60))) for _ in range(adversarial)]
    for _ in range(adversarial * 2 // 3):
        text = rng.choice(corpus)
        a, b = sorted(rng.randrange(len(text) + 1) for _ in range(2))
        text = text[:a] + rng.choice(PIECES) + text[b:] if rng.random() < 0.5 else text[a:] + text[:b]
        if rng.random() < 0.3:
            text = base64.b64encode(text.encode()).decode() if rng.random() < 0.5 else text.replace("\n", "\\n")
        out.append(text)
    for path in stdlib_sample()[:300]:
        source = path.read_text(encoding="utf-8", errors="replace")[:30_000]
        out += [source[i : i + 3000] for i in range(0, len(source), 3000)]
    return [*out, hashes_uuids_base64(random.Random(7))]


def emit(texts_path: str, out_path: str) -> None:
    """Run inside the tree to compare: its redaction of every text, pickled."""
    try:
        from feedback_store.redaction import prefilter
        from feedback_store.redaction.redactor import Redactor
    except ImportError:  # a revision from before redaction was a package of its own
        from feedback_store.redact import Redactor

        from feedback_store import redact_select as prefilter

    items = pickle.loads(Path(texts_path).read_bytes())
    fast = Redactor(env=ENV)
    out = [fast.redact(text) for text in items]
    values = [fast.redact_value({"a": text, "b": [text[:50]]}) for text in items[::10]]
    prefilter.hyperscan = None
    slow = Redactor(env=ENV)
    alone = [slow.redact(text) for text in items[::10]]
    result = {"text": out, "value": values, "without hyperscan": alone, "counts": (fast.counts, slow.counts)}
    Path(out_path).write_bytes(pickle.dumps(result))


def run_tree(tree: Path, texts_path: Path, out_path: Path) -> dict:
    command = [sys.executable, __file__, "--emit", str(texts_path), str(out_path)]
    subprocess.run(command, cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)}, check=True)
    return pickle.loads(out_path.read_bytes())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", default="HEAD", help="the revision whose output is the reference")
    parser.add_argument("--adversarial", type=int, default=12_000, help="random strings of credential pieces")
    parser.add_argument("--emit", nargs=2, metavar=("TEXTS", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.emit:
        emit(*args.emit)
        return
    items = texts(args.adversarial)
    with tempfile.TemporaryDirectory() as tmp:
        old_tree, texts_path = Path(tmp) / "old", Path(tmp) / "texts.pickle"
        archive = subprocess.run(["git", "archive", args.against], cwd=ROOT, capture_output=True, check=True).stdout
        tarfile.open(fileobj=BytesIO(archive)).extractall(old_tree, filter="data")
        texts_path.write_bytes(pickle.dumps(items))
        old = run_tree(old_tree, texts_path, Path(tmp) / "old.pickle")
        new = run_tree(ROOT, texts_path, Path(tmp) / "new.pickle")
    differ = 0
    for kind in ("text", "value", "without hyperscan"):
        bad = [i for i, (a, b) in enumerate(zip(old[kind], new[kind], strict=True)) if a != b]
        differ += len(bad)
        print(f"{kind}: {len(old[kind])} outputs, {len(bad)} differ")
        for i in bad[:3]:
            print(f"  {old[kind][i]!r:.200}\n  {new[kind][i]!r:.200}")
    same_counts = old["counts"] == new["counts"]
    print(f"counts by kind {'identical' if same_counts else 'differ'}: {sum(old['counts'][0].values())} redactions")
    sys.exit(0 if differ == 0 and same_counts else 1)


if __name__ == "__main__":
    main()
