"""Secrets are redacted from exports: provider keys, generic credentials, environment values.

Every secret here is assembled at run time, so no secret-looking literal sits in the repository.
"""

from __future__ import annotations

import base64
import hashlib
import json
import string
from pathlib import Path

import pytest

from feedback_store import Recorder, open_store
from feedback_store.export.export import export
from feedback_store.redaction.checks import shannon_entropy
from feedback_store.redaction.redactor import Redactor
from feedback_store.stats import compute_stats, format_stats, secret_counts
from tests.store.events import FakeSession

ALNUM = string.ascii_letters + string.digits


def chars(n: int, seed: str, alphabet: str = ALNUM) -> str:
    digest = b""
    counter = 0
    while len(digest) < n:
        digest += hashlib.sha256(f"{seed}{counter}".encode()).digest()
        counter += 1
    return "".join(alphabet[b % len(alphabet)] for b in digest[:n])


def b64url(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


def pem() -> str:
    body = "\n".join(chars(64, f"pem{i}", ALNUM + "+/") for i in range(4))
    kind = "RSA " + "PRIVATE" + " KEY"
    return f"-----BEGIN {kind}-----\n{body}\n-----END {kind}-----"


SECRETS = {
    "openai": "sk-" + "proj-" + chars(48, "openai"),
    "anthropic": "sk-" + "ant-" + "api03-" + chars(93, "anthropic", ALNUM + "-_") + "AA",
    "aws_access_key": "AK" + "IA" + chars(16, "aws", string.ascii_uppercase + "234567"),
    "github_classic": "gh" + "p_" + chars(36, "ghp"),
    "github_fine_grained": "github_" + "pat_" + chars(22, "ghf1") + "_" + chars(59, "ghf2"),
    "google": "AI" + "za" + chars(35, "google"),
    "huggingface": "hf" + "_" + chars(34, "hf", string.ascii_letters),
    "slack": "xo"
    + "xb-"
    + chars(12, "s1", string.digits)
    + "-"
    + chars(13, "s2", string.digits)
    + "-"
    + chars(24, "s3"),
    "stripe": "sk" + "_live_" + chars(24, "stripe"),
    "jwt": b64url({"alg": "HS256", "typ": "JWT"})
    + "."
    + b64url({"sub": "1234567890", "name": "Ann"})
    + "."
    + chars(43, "sig", ALNUM + "-_"),
    "private_key": pem(),
}
AWS_SECRET = chars(40, "awssecret", ALNUM + "/+")
URL_PASSWORD = chars(14, "urlpw")


def contexts(secret: str) -> dict[str, str]:
    """The same secret as it shows up in a chat message, in code, and in a URL."""
    code = f'client = Client(api_key="{secret}")\n' if "\n" not in secret else f'KEY = """{secret}"""\n'
    chat = json.dumps({"role": "tool", "content": f"cat .env\nSERVICE_CREDENTIAL={secret}\nDEBUG=1\n"})
    arguments = json.dumps({"path": "settings.py", "content": code})
    url = f"curl 'https://api.example.com/v1/items?key={secret}&limit=5'"
    return {"chat": chat, "tool_arguments": arguments, "code": code, "url": url}


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_provider_keys_are_redacted_in_every_context(kind: str) -> None:
    secret = SECRETS[kind]
    for where, text in contexts(secret).items():
        if kind == "private_key" and where == "url":
            continue
        redactor = Redactor(env={})
        out = redactor.redact(text)
        core = secret.splitlines()[1] if kind == "private_key" else secret
        assert core not in out and "[REDACTED:" in out, (kind, where, out)
        assert redactor.total >= 1


def test_aws_secret_key_next_to_its_name() -> None:
    for text in (
        f'aws_secret_access_key = "{AWS_SECRET}"',
        f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}",
        json.dumps({"aws_secret_access_key": AWS_SECRET}),
    ):
        redactor = Redactor(env={})
        out = redactor.redact(text)
        assert AWS_SECRET not in out and redactor.counts, text


def test_passwords_in_urls() -> None:
    redactor = Redactor(env={})
    for url in (
        f"postgres://admin:{URL_PASSWORD}@db.internal:5432/app",
        f"https://deploy:{URL_PASSWORD}@git.example.com/repo.git",
    ):
        out = redactor.redact(json.dumps({"content": f"connect to {url} now"}))
        assert URL_PASSWORD not in out and "admin" in out or "deploy" in out
    assert redactor.counts["url_password"] == 2


def test_generic_credentials_by_keyword_and_entropy() -> None:
    value = chars(20, "generic")
    redactor = Redactor(env={})
    assert value not in redactor.redact(f'DB_PASSWORD = "{value}"')
    assert value not in redactor.redact(f"export API_TOKEN={value}")
    assert value not in redactor.redact(json.dumps({"content": f"secret: '{value}'"}))


def test_credential_environment_values_are_redacted_exactly() -> None:
    value = "q8Zr" + "x7Lp0-internal"
    redactor = Redactor(env={"MY_SERVICE_TOKEN": value, "PATH": "/usr/bin:/bin", "HOME": "/root"})
    out = redactor.redact(f"the deploy step printed {value} to the log; PATH is /usr/bin:/bin")
    assert value not in out and "/usr/bin:/bin" in out and redactor.counts == {"env_value": 1}


ORDINARY_CODE = """
import os

password = request.form["password"]
token = get_token(user)
api_key = os.environ["OPENAI_API_KEY"]
SECRET_KEY = settings.SECRET_KEY
token_type = "bearer_token_v2"
token_url = "https://auth.example.com/oauth2/token"
commit = "3f786850e387550fdab836ed7e6dc881de23001b"
request_id = "a1b2c3d4-e5f6-7890-abcd-ef1234567890"
MAX_TOKENS = 4096
skip = "sk-learn"
url = "https://example.com:8080/path?page=2"
def check_password(password: str) -> bool:
    return hashlib.sha256(password.encode()).hexdigest() == STORED
const token = authResponse.accessToken;
headers = {"Authorization": f"Bearer {token}"}
curl -H "Authorization: Bearer $GITHUB_TOKEN" https://api.github.com/user
password: ${DB_PASSWORD}
api_key: <your-api-key>
tokenizer = "HuggingFaceTB/SmolLM2-135M-Instruct"
content_key = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
Basic usage: pass the token with --token $TOKEN.
self._authkey = self._manager._authkey
proxy = "http://user:password@proxy.example.com:3128"
"""


def test_ordinary_code_is_left_alone() -> None:
    redactor = Redactor(env={})
    assert redactor.redact(ORDINARY_CODE) == ORDINARY_CODE
    assert redactor.redact(json.dumps({"content": ORDINARY_CODE})) == json.dumps({"content": ORDINARY_CODE})
    assert redactor.total == 0


def test_entropy() -> None:
    assert shannon_entropy("aaaa") == 0
    assert shannon_entropy("abcd") == 2


def test_export_redacts_by_default_and_counts(tmp_path: Path) -> None:
    secret = SECRETS["openai"]
    s = FakeSession().start().user(f"use the key {secret} to call the API")
    s.call(
        "read_file",
        {"path": ".env"},
        ok=False,
        error_kind="not_found",
        target=".env",
        result=f".env is missing. Did you mean env.example (OPENAI_API_KEY={secret})?",
    )
    s.call("read_file", {"path": "env.example"}, target=".env", result="ok")
    db = tmp_path / "f.db"
    store = open_store(db)
    Recorder(store).record_many(s.finish().events)
    out = tmp_path / "out.jsonl"
    result = export([db], "sdpo", out)
    text = out.read_text()
    assert secret not in text and result.redactions == 2 and result.redacted_kinds == {"openai_api_key": 2}
    raw = export([db], "sdpo", out, redact=False)
    assert secret in out.read_text() and raw.redactions == 0


def test_every_text_field_of_a_record_is_redacted_and_counted_by_kind() -> None:
    key, token = SECRETS["anthropic"], SECRETS["github_classic"]
    record = {
        "format": "teachback-sdpo-1",
        "prompt": [{"role": "user", "content": f"use {key}"}],
        "completion": {
            "role": "assistant",
            "tool_calls": [
                {
                    "function": {
                        "name": "edit_file",
                        "arguments": json.dumps({"path": ".env", "new_text": f"A=1\nGH_TOKEN={token}\n"}),
                    }
                }
            ],
        },
        "feedback": f"push failed for {token}",
        "metadata": {"tokens": 12},
    }
    redactor = Redactor(env={})
    out = redactor.redact_value(record)
    text = json.dumps(out)
    assert key not in text and token not in text and out["metadata"] == {"tokens": 12}
    assert redactor.counts == {"anthropic_api_key": 1, "github_token": 2}
    assert (
        json.loads(out["completion"]["tool_calls"][0]["function"]["arguments"])["new_text"]
        == "A=1\nGH_TOKEN=[REDACTED:github_token]\n"
    )


def test_authorization_headers_and_command_line_credentials() -> None:
    basic = base64.b64encode(b"deploy:" + chars(18, "basicpw").encode()).decode()
    bearer = chars(40, "bearer", ALNUM + "-._~")
    redactor = Redactor(env={})
    out = redactor.redact(
        f"curl -H 'Authorization: Basic {basic}' -H \"Authorization: Bearer {bearer}\" "
        f"-u admin:{URL_PASSWORD} https://h/ ; Basic operations are cheap"
    )
    assert basic not in out and bearer not in out and URL_PASSWORD not in out
    assert redactor.counts == {"basic_auth": 1, "bearer_token": 1, "command_line_password": 1}
    assert "Basic operations are cheap" in out


def test_passwords_known_by_their_place_on_a_command_line_or_in_netrc() -> None:
    pw = chars(14, "placepw", ALNUM + "^_~.")
    lines = [
        f"mysql -h db -u root -p{pw} shop",
        f"-mysqldump -uroot -p'{pw}' shop > d.sql",  # a diff line
        f"sshpass -p '{pw}' ssh host",
        f"redis-cli -h cache -a {pw} ping",
        f"htpasswd -cb /etc/.htpasswd alice {pw}",
        f"openssl enc -aes256 -k {pw} -in f",
        f"smbclient //h/share -U bob%{pw}",
        f"machine api.example.com login alice password {pw}",
        f" 7| machine api.example.com\n  login alice\n  password {pw}",
        f"PGPASSWORD={pw} psql -h db",
        f"export SSHPASS={pw}",
    ]
    for line in lines:
        for text in (line, json.dumps({"command": line})):
            out = Redactor(env={}).redact(text)
            assert pw not in out, text
    prose = [
        "mysql_config --cflags -pthread",
        "mysql -u root -p shop",
        "mysql -u root -p$MYSQL_PWD shop",
        "password authentication failed for user",
        "login required password needed",
        "  password: str,",
        "gcc -pthread -o x main.c",
    ]
    redactor = Redactor(env={})
    assert [redactor.redact(text) for text in prose] == prose and redactor.total == 0


def test_found_spans_are_ordered_and_disjoint_and_env_values_win() -> None:
    token = SECRETS["github_classic"]
    redactor = Redactor(env={"CI_TOKEN": token})
    text = f"GITHUB_TOKEN={token} and again {token}"
    spans = redactor.find(text)
    assert [kind for _, _, kind in spans] == ["env_value", "env_value"]
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    assert redactor.total == 0  # find() counts nothing; redact() does
    assert redactor.redact(text) == "GITHUB_TOKEN=[REDACTED:env_value] and again [REDACTED:env_value]"


def test_stats_count_what_an_export_would_redact(tmp_path: Path) -> None:
    secret = SECRETS["openai"]
    s = FakeSession().start().user(f"use the key {secret} and the Slack token {SECRETS['slack']}")
    s.call(
        "read_file",
        {"path": ".env"},
        ok=False,
        error_kind="not_found",
        target=".env",
        result=f".env is missing. Did you mean env.example (OPENAI_API_KEY={secret})?",
    )
    s.call("read_file", {"path": "env.example"}, target=".env", result="ok")
    store = open_store(tmp_path / "f.db")
    Recorder(store).record_many(s.finish().events)
    stats = compute_stats(store)
    assert stats["secrets_by_kind"] == secret_counts(store, Redactor(env={})) == {"openai_api_key": 3, "slack_token": 1}
    assert "Secrets an export would redact: 4 (openai_api_key: 3, slack_token: 1)" in format_stats(stats)


def test_stats_read_a_text_stored_many_times_once_and_count_each_time(tmp_path: Path) -> None:
    class Counting(Redactor):
        texts: list[str] = []

        def find(self, text: str) -> list:
            self.texts.append(text)
            return super().find(text)

    store = open_store(tmp_path / "f.db")
    prompt = f"deploy with {SECRETS['slack']}"
    for _ in range(3):  # three sessions that start with the same message
        Recorder(store).record_many(FakeSession().start().user(prompt).finish().events)
    redactor = Counting(env={})
    assert secret_counts(store, redactor) == {"slack_token": 3}
    assert redactor.texts.count(prompt) == 1


def test_structured_values_are_redacted_through_their_json() -> None:
    password = chars(20, "dictpw", ALNUM + "!#%")
    quoted = 'p"w' + chars(12, "quoted")
    redactor = Redactor(env={"DEPLOY_SECRET": quoted})
    arguments = {"path": "db.json", "content": {"user": "app", "password": password}, "note": f"set {quoted}"}
    out = redactor.redact_value(arguments)
    assert out == {
        "path": "db.json",
        "content": {"user": "app", "password": "[REDACTED:generic_secret]"},
        "note": "set [REDACTED:env_value]",
    }
    assert redactor.counts == {"generic_secret": 1, "env_value": 1}
