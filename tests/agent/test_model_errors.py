"""Model failures that no retry can fix fail at once and say what to change: an unknown model, a
missing API key, a server that refuses the request. Real litellm calls against a local HTTP server."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from agent.llm import load_litellm
from agent.model import LiteLLMModel, ModelError

TEACHBACK = [sys.executable, "-m", "cli"]
LLAMA_CPP_REFUSAL = "response_format type json_schema is not supported"
KEY_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_ADMIN_KEY", "ANTHROPIC_AUTH_TOKEN")


class Refusing(BaseHTTPRequestHandler):
    """An OpenAI-compatible server that answers every chat request with one error, as
    llama-cpp-python's server does: {"error": {"message": ..., "type": ...}}."""

    status = 400
    requests: list[dict] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.requests.append(json.loads(body))
        kind = "invalid_request_error" if self.status < 500 else "internal_server_error"
        out = json.dumps({"error": {"message": LLAMA_CPP_REFUSAL, "type": kind, "param": None, "code": None}})
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out.encode())

    def log_message(self, *args: object) -> None:
        """Quiet: the test reads `requests`."""


@pytest.fixture
def refusing_server(request) -> Iterator[tuple[str, list[dict]]]:
    handler = type("Handler", (Refusing,), {"status": getattr(request, "param", 400), "requests": []})
    server = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", handler.requests
    server.shutdown()
    server.server_close()


@pytest.fixture
def no_keys(monkeypatch) -> dict[str, str]:
    for name in KEY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return {k: v for k, v in os.environ.items() if k not in KEY_VARIABLES}


def teachback(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([*TEACHBACK, *args], capture_output=True, text=True, timeout=120, env=env)


async def fails(model: LiteLLMModel, within: float = 20) -> tuple[ModelError, float]:
    load_litellm()  # seconds to import: not part of what is timed
    started = time.monotonic()
    with pytest.raises(ModelError) as info:
        await asyncio.wait_for(model.complete([{"role": "user", "content": "hi"}], []), within)
    return info.value, time.monotonic() - started


# -- unknown model ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["nonsense", "nosuchprovider/model-x"])
async def test_an_unknown_model_fails_at_once_as_not_found(name):
    error, took = await fails(LiteLLMModel(name, backoff_s=5))
    assert error.kind == "not_found" and took < 5
    assert "anthropic/claude-sonnet-4-5" in str(error) and name in str(error)


def test_run_with_an_unknown_model_exits_2(git_repo, no_keys):
    done = teachback("run", "--no-record", "--workspace", str(git_repo), "--model", "nonsense", "hi", env=no_keys)
    assert done.returncode == 2, done.stderr + done.stdout
    # refused before the session starts: on stderr, with nothing on the transcript
    assert "names no provider litellm knows" in done.stderr and done.stdout == ""
    assert "Traceback" not in done.stderr


# -- missing API key -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "variable"),
    [("openai/gpt-4o-mini", "OPENAI_API_KEY"), ("anthropic/claude-sonnet-4-5", "ANTHROPIC_API_KEY")],
)
async def test_a_missing_key_fails_at_once_naming_the_variable(no_keys, name, variable):
    error, took = await fails(LiteLLMModel(name, backoff_s=5))  # 3 retries would take 5 + 10 + 20 s
    assert error.kind == "auth" and took < 5
    assert variable in str(error) and "export" in str(error)


async def test_a_missing_key_for_a_local_server_says_any_value_will_do(no_keys, refusing_server):
    api_base, requests = refusing_server
    error, _ = await fails(LiteLLMModel("openai/smollm2", api_base=api_base, backoff_s=5))
    assert error.kind == "auth" and "OPENAI_API_KEY=none" in str(error)
    assert requests == []  # refused before anything was sent


def test_run_with_a_missing_key_exits_2_with_what_to_set(git_repo, no_keys):
    started = time.monotonic()
    done = teachback(
        "run", "--no-record", "--workspace", str(git_repo), "--model", "openai/gpt-4o-mini", "hi", env=no_keys
    )
    assert done.returncode == 2, done.stderr + done.stdout
    assert "OPENAI_API_KEY" in done.stderr and "unavailable" not in done.stderr and done.stdout == ""
    assert "retry" not in done.stderr and time.monotonic() - started < 60


# -- a server that refuses the request -----------------------------------------------------------


@pytest.mark.parametrize("refusing_server", [400, 422], indirect=True)
async def test_a_refused_grammar_request_is_not_retried_and_says_what_to_change(monkeypatch, refusing_server):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local")
    api_base, requests = refusing_server
    model = LiteLLMModel("openai/smollm2", tool_mode="grammar", api_base=api_base, backoff_s=0.01)
    tools = [{"type": "function", "function": {"name": "finish", "parameters": {"type": "object"}}}]
    with pytest.raises(ModelError) as info:
        await model.complete([{"role": "user", "content": "hi"}], tools)
    text = str(info.value)
    assert info.value.kind == "bad_request" and len(requests) == 1
    assert requests[0]["response_format"]["type"] == "json_schema"
    assert LLAMA_CPP_REFUSAL in text and api_base in text  # what the server refused, and which server
    assert 'tool_mode = "json_object"' in text and 'tool_mode = "text"' in text  # what to change
    assert "could not be reached" not in text


@pytest.mark.parametrize("refusing_server", [500], indirect=True)
async def test_a_server_error_repeated_word_for_word_stops_the_retries(monkeypatch, refusing_server):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local")
    api_base, requests = refusing_server
    model = LiteLLMModel("openai/smollm2", tool_mode="grammar", api_base=api_base, backoff_s=0.01)
    error, _ = await fails(model)
    assert error.kind == "bad_request" and len(requests) == 2
    assert "HTTP 500" in str(error) and LLAMA_CPP_REFUSAL in str(error) and "json_object" in str(error)


async def test_the_json_object_mode_sends_the_schema_in_that_form(monkeypatch, refusing_server):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local")
    api_base, requests = refusing_server
    schema = {"type": "object", "properties": {"summary": {"type": "string"}}}
    tools = [{"type": "function", "function": {"name": "finish", "parameters": schema}}]
    model = LiteLLMModel("openai/smollm2", tool_mode="json_object", api_base=api_base)
    with pytest.raises(ModelError):
        await model.complete([{"role": "user", "content": "hi"}], tools)
    sent = requests[0]["response_format"]
    assert sent["type"] == "json_object" and sent["schema"]["properties"]["arguments"] == schema


def test_run_against_a_refusing_server_explains_and_stops(git_repo, refusing_server, no_keys):
    api_base, requests = refusing_server
    (git_repo / "teachback.toml").write_text(f'tool_mode = "grammar"\napi_base = "{api_base}"\n')
    done = teachback(
        "run",
        "--no-record",
        "--workspace",
        str(git_repo),
        "--model",
        "openai/smollm2",
        "hi",
        env={**no_keys, "OPENAI_API_KEY": "sk-local"},
    )
    assert done.returncode == 1, done.stderr + done.stdout
    assert LLAMA_CPP_REFUSAL in done.stdout and 'tool_mode = "text"' in done.stdout
    assert len(requests) == 1 and "Traceback" not in done.stderr


def test_the_json_object_tool_mode_is_a_setting(tmp_path: Path):
    from agent.config import load_settings

    (tmp_path / "teachback.toml").write_text('tool_mode = "json_object"\n')
    assert load_settings(tmp_path).tool_mode == "json_object"
