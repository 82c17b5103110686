"""Encoded copies of secrets (base64, percent-encoding, `\\u` and `\\x` escapes) are decoded, to a
bounded depth, and redacted in their encoded form; ordinary encoded data is left alone. And every
class of these (made-up passwords, name/value lists, encoded copies) is gone from every export
format.

Every secret here is assembled at run time, so no secret-looking literal sits in the repository.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

from feedback_store import Recorder, open_store
from feedback_store.export.export import FORMATS, export
from feedback_store.redaction import decode
from feedback_store.redaction.redactor import Redactor
from tests.store.events import FakeSession, edit, mixed_session
from tests.store.test_redact import SECRETS, chars
from tests.store.test_redact_passwords import made_up_password


def test_encoded_copies_are_redacted_in_their_encoded_form() -> None:
    token = SECRETS["github_classic"]
    pw = made_up_password("encoded")
    env = f"DEBUG=false\nGITHUB_TOKEN={token}\nSMTP_PASSWORD={pw}\nPORT=8080\n"

    def percent(text: str) -> str:
        return "".join(c if c.isalnum() else f"%{ord(c):02X}" for c in text)

    def escaped(text: str, form: str = "\\u{:04x}") -> str:
        return "".join(form.format(ord(c)) for c in text)

    data = base64.b64encode(env.encode()).decode()
    lines76, lines60 = ([data[i : i + n] for i in range(0, len(data), n)] for n in (76, 60))
    url_safe = base64.urlsafe_b64encode(env.encode()).decode().rstrip("=")
    twice, of_percent = (base64.b64encode(t.encode()).decode() for t in (data, percent(env)))
    # each text, and the encoded parts that must not survive in it
    texts = {
        "base64": (f"$ echo {data} | base64 -d > .env", [data]),
        "base64 wrapped": ("$ base64 .env\n" + "\n".join(lines76) + "\n", lines76),
        "base64 in JSON": (json.dumps({"encoding": "base64", "content": "\n".join(lines60) + "\n"}), lines60),
        "base64url": (f"token={url_safe}", [url_safe]),
        "base64 twice": (twice, [twice]),
        "base64 of percent": (of_percent, [of_percent]),
        "percent": (f"https://paste.example.com/new?text={percent(env)}&title=env", [percent(token), percent(pw)]),
        "unicode escapes": ('{"content": "' + escaped(env) + '"}', [escaped(token), escaped(pw)]),
        "hex escapes": (
            "data = '" + escaped(env, "\\x{:02x}") + "'",
            [escaped(token, "\\x{:02x}"), escaped(pw, "\\x{:02x}")],
        ),
    }
    for where, (text, encoded) in texts.items():
        redactor = Redactor(env={})
        out = redactor.redact(text)
        assert not any(part in out for part in encoded), (where, out)
        assert redactor.total >= 1 and "[REDACTED:" in out, where
    out = Redactor(env={}).redact(texts["percent"][0])  # only the secrets' encoded spans go
    assert out.startswith("https://paste.example.com/new?text=DEBUG%3Dfalse%0AGITHUB%5FTOKEN%3D[REDACTED:")
    assert out.endswith("%0APORT%3D8080%0A&title=env")
    unescaped = json.loads(Redactor(env={}).redact(texts["unicode escapes"][0]))["content"]
    assert unescaped.startswith("DEBUG=false\nGITHUB_TOKEN=[REDACTED:") and "SMTP_PASSWORD=[REDACTED:" in unescaped


def test_encoded_copies_inside_json_values_keep_the_json_valid() -> None:
    token = SECRETS["slack"]
    escaped = "".join(f"\\u{ord(c):04x}" for c in f"SLACK_TOKEN={token}")
    value = {"content": f"const s = '{escaped}';", "note": f"percent {token.replace('-', '%2D')}"}
    redactor = Redactor(env={})
    out = redactor.redact_value(value)
    assert token not in json.dumps(out) and escaped[:60] not in json.dumps(out), out
    assert redactor.counts["slack_token"] == 2 and out["content"].startswith("const s = '")


def test_decoding_has_a_depth_bound() -> None:
    text = f"GITHUB_TOKEN={SECRETS['github_classic']}"
    nested = [text]
    for _ in range(7):
        nested.append(base64.b64encode(nested[-1].encode()).decode())
    assert [Redactor(env={}).find(n) != [] for n in nested] == [True] * 6 + [False] * 2


def test_ordinary_encoded_data_is_left_alone() -> None:
    texts = [
        "image/png;base64," + base64.b64encode(bytes(range(256)) * 4).decode(),
        base64.b64encode(b"The quick brown fox jumps over the lazy dog, twice.").decode(),
        "https://example.com/search?q=rain%20in%20spain&lang=en%2DGB",
        "print('%02d:%02d' % (h, m)); sep = '\\x00\\x1f'",
        '{"text": "caf\\u00e9 cr\\u00e8me \\u2014 na\\u00efve"}',
        "    self.assertEqual(base64.b64encode(b'hello world'), b'aGVsbG8gd29ybGQ=')",
    ]
    redactor = Redactor(env={})
    assert [redactor.redact(t) for t in texts] == texts and redactor.total == 0


def test_every_class_is_gone_from_every_export_format(tmp_path: Path) -> None:
    pw, other_pw = made_up_password("export"), made_up_password("export-list")
    key, token = chars(32, "export-dd", "0123456789abcdef"), SECRETS["github_classic"]
    env = f"GITHUB_TOKEN={token}\nPORT=8080\n"
    task = (
        f"Deploy with SMTP_PASSWORD={pw} and this manifest:\n"
        f"env:\n  - name: DATADOG_API_KEY\n    value: {key}\n  - name: DB_PASSWORD\n    value: '{other_pw}'\n"
        f"The old config was {base64.b64encode(env.encode()).decode()} (base64), sent as "
        f"text={''.join(c if c.isalnum() else f'%{ord(c):02X}' for c in env)}"
    )
    secrets = [pw, other_pw, key, token, base64.b64encode(env.encode()).decode()[:24], "GITHUB%5FTOKEN%3Dghp"]
    reviewed = FakeSession().start().user(task)
    reviewed.call(
        "edit_file", {"path": "b.py"}, target="b.py", edits=[edit("b.py", "x = 1\n", "x = 2\n", edit_id="e1")]
    )
    reviewed.review("e1", "b.py", "corrected", user_content="X = 2\n")
    store = open_store(tmp_path / "f.db")
    Recorder(store).record_many([*mixed_session(task=task).events, *reviewed.finish().events])
    store.close()
    for fmt, form in FORMATS.items():
        out = tmp_path / (f"{fmt}.parquet" if form.parquet else f"{fmt}.jsonl")
        result = export([tmp_path / "f.db"], fmt, out, tokenizer="estimate")
        if form.parquet:
            import pyarrow.parquet

            text = json.dumps(pyarrow.parquet.read_table(out).to_pylist(), default=str)
        else:
            text = out.read_text()
        assert result.records > 0 and "[REDACTED:" in text, fmt
        assert not [s for s in secrets if s in text], (fmt, [s for s in secrets if s in text])
        assert {"password", "generic_secret", "github_token"} <= set(result.redacted_kinds), (
            fmt,
            result.redacted_kinds,
        )


def test_escaped_backslashes_in_a_run_of_escapes_keep_each_character_in_its_place() -> None:
    # `\\\` before an escape is one escaped backslash: one decoded character, as every unit is.
    texts = ["=\\u0041Z<\\u00417%41\\u0041\\x41%41'%\\u0041\\\\\\u0042password=Z%02é/", "k=\\u0041\\u0042CDEFGHIJ\\\\"]
    for text in texts:
        for segment in decode.segments(text, [], True, True):
            assert len(segment.offsets) == len(segment.decoded) + 1, segment
    assert Redactor(env={}).redact(texts[0]).endswith("password=[REDACTED:password]")
