"""Every exported correction is true: each dpo `chosen`, sft and kto-true completion, trl-sdft
demonstration and sdpo `chosen` is a call that succeeded when it was made (checked against the
recorded events) and that applies to the workspace as it was at the failed turn's prefix; one
derived from a file's net change says so, and leaves the file as the fix did. Written in the model's
own format: a grammar-mode model's replies are trained as it wrote them, spacing included."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agent.config import Settings
from agent.protocol import UserInput, textcalls
from agent.runtime import open_session
from feedback_store import Recorder, open_store
from feedback_store.export.export import export
from tests.conftest import call, turn
from tests.store.events import FakeSession, edit
from tests.store.test_export_fit import initial_files, session_a, session_b, workspace_at

pytestmark = pytest.mark.timeout(180)

GRAMMAR = [  # calls as the embedded model's grammar writes them: spaces inside the arguments' braces
    '{"name": "read_file", "arguments": { "path": "/tmp/t14/app.py" }}',  # outside the workspace
    '{"name": "open_file", "arguments": { "path": "app.py" }}',  # no such tool
    '{"name": "read_file", "arguments": { "path": "src/app.py" }}',  # not found: corrects nothing
    '{"name": "read_file", "arguments": { "path": "app.py" }}',
    '{"name": "edit_file", "arguments": { "path": "util.py", "old_text": "return a+b", "new_text": "x" }}',
    '{"name": "edit_file", "arguments": { "path": "util.py", "old_text": "    return a + b\\n", '
    '"new_text": "    return (a + b\\n" }}',  # breaks the file: a lint pair
    '{"name": "edit_file", "arguments": { "path": "util.py", "old_text": "(a + b\\n", "new_text": "(a + b)\\n" }}',
    '{"name": "run_command", "arguments": { "command": "no-such-test-runner -q" }}',  # cannot run
    '{"name": "run_command", "arguments": { "command": "python -c \\"import util\\"" }}',
    '{"name": "finish", "arguments": { "summary": "done" }}',
]


def session_c(script) -> str:
    """The same mistakes made by a native-mode model."""
    return script(
        *(turn(call(c["name"], c["arguments"], f"c{n}")) for n, c in enumerate(map(json.loads, GRAMMAR), 1)),
        name="c.json",
    )


async def record_session(repo: Path, db: Path, model: str, **settings: Any) -> None:
    """One session on the repository's committed files, recorded into `db`."""
    subprocess.run(["git", "checkout", "-q", "--", "."], cwd=repo, check=True)
    store = open_store(db)
    session = open_session(repo, Settings(model=model, approval="full-auto", repo_map_tokens=0, **settings))
    session.subscribe(Recorder(store))
    await session.run(UserInput(text="Read app.py and tidy util.py"))
    store.close()


def corrections(fmt: str, record: dict[str, Any], names: list[str]) -> list[tuple[dict[str, Any], Any]]:
    """(message or text, derived) of each correction a record trains on."""
    if fmt == "dpo":
        return [(record["chosen"][0], record["chosen_derived"])]
    if fmt == "sft" or (fmt == "kto" and record["label"] and record["id"].endswith("-fix")):
        return [(record["completion"][0], record["chosen_derived"])]
    if fmt == "trl-sdft":
        text = record["privileged_context"].removeprefix("Example response:\n").split("\n\nWhy an earlier")[0]
        return [({"role": "assistant", "content": text}, record["chosen_derived"])]
    if fmt == "sdpo" and record["chosen"] is not None:
        found = [(record["chosen"], record["chosen_derived"])]
        if (record["rendered"] or {}).get("chosen") is not None:  # what the trainer's demonstration shows
            found.append(({"role": "assistant", "content": record["rendered"]["chosen"]}, record["chosen_derived"]))
        return found
    return []


def the_call(message: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """The one call of an exported reply (native: its tool_calls; text: parsed from its text)."""
    calls = message.get("tool_calls") or textcalls.parse_reply(message["content"], names).tool_calls
    assert len(calls) == 1, message
    arguments = calls[0]["function"]["arguments"]
    return {
        **calls[0],
        "function": {
            **calls[0]["function"],
            "arguments": json.loads(arguments) if isinstance(arguments, str) else arguments,
        },
    }


def apply(call: dict[str, Any], files: dict[str, str]) -> dict[str, str]:
    """Run one call on the files as the tools would, asserting that it can run there."""
    name, args = call["function"]["name"], call["function"]["arguments"]
    out = dict(files)
    if name == "edit_file":
        assert files[args["path"]].count(args["old_text"]) == 1, (args, files.get(args["path"]))
        out[args["path"]] = files[args["path"]].replace(args["old_text"], args["new_text"], 1)
    elif name == "create_file":
        assert args["path"] not in files
        out[args["path"]] = args["content"]
    elif name in ("read_file", "delete_file"):
        assert args["path"] in files, args
        if name == "delete_file":
            del out[args["path"]]
    else:
        assert name in ("run_command", "list_files", "search", "finish"), name
    return out


def files_after(store, session_id: str, event_id: str, initial: dict[str, str]) -> dict[str, str]:
    files = dict(initial)
    for event in store.events(session_id):
        if event["type"] == "edit_applied":
            files.pop(event["path"], None)
            if event["after"] is not None:
                files[event["new_path"] or event["path"]] = event["after"]
        if event["id"] == event_id:
            return files
    raise AssertionError(f"no event {event_id}")


def assert_true(store, pair, call: dict[str, Any], derived: bool, initial: dict[str, str]) -> None:
    events = store.events(pair.session_id)
    after = apply(call, workspace_at(store, pair.session_id, len(pair.prompt), initial))  # applies at the prefix
    [fixed_by] = store.query("SELECT correction_event_id FROM pairs WHERE id = ?", (pair.id,))
    fix = next(e for e in events if e["id"] == fixed_by["correction_event_id"])
    assert fix.get("ok", True)  # the fix that was recorded succeeded (an edit's event has no `ok`)
    if derived:  # composed from the net change: it leaves the file as the fix did
        path = call["function"]["arguments"]["path"]
        assert after.get(path) == files_after(store, pair.session_id, fix["id"], initial).get(path)
        return
    failed_at = next(i for i, e in enumerate(events) if e["id"] == pair.id.rsplit("-", 1)[0])
    finished = {e["call_id"]: (i, e) for i, e in enumerate(events) if e["type"] == "tool_call_finished"}
    made = [  # the calls of the session with these arguments (a text reply's call carries no id)
        finished[e["call_id"]]
        for e in events
        if e["type"] == "tool_call_started"
        and e["name"] == call["function"]["name"]
        and json.loads(e["arguments"]) == call["function"]["arguments"]
        and finished[e["call_id"]][0] > failed_at
    ]
    assert any(e["ok"] is True and e["message"] is not None for _, e in made), call


async def test_every_exported_correction_is_a_call_that_succeeded_and_applies_at_its_prefix(
    git_repo: Path, script, tmp_path: Path
) -> None:
    initial = initial_files(git_repo)
    db = tmp_path / "f.db"
    await record_session(git_repo, db, session_a(script))
    await record_session(git_repo, db, session_b(script))
    await record_session(git_repo, db, session_c(script))
    grammar = script(*(turn(content=text) for text in GRAMMAR), name="grammar.json")
    await record_session(git_repo, db, grammar, tool_mode="grammar")
    store = open_store(db)
    pairs = {p.id: p for p in store.pairs()}
    checked: dict[str, int] = {}
    for fmt in ("dpo", "sft", "kto", "trl-sdft", "sdpo"):
        out = tmp_path / f"{fmt}.jsonl"
        export([db], fmt, out, tokenizer="estimate", redact=False)
        for line in out.read_text().splitlines():
            record = json.loads(line)
            pair = pairs[record["id"].removesuffix("-fix")]
            names = [t["function"]["name"] for t in pair.tools]
            for message, derived in corrections(fmt, record, names):
                assert_true(store, pair, the_call(message, names), derived, initial)
                checked[fmt] = checked.get(fmt, 0) + 1
    # each session's schema, wrong-path, no-match, lint, test and cannot-run pairs: a correction each
    assert checked["dpo"] == checked["sft"] == checked["kto"] == checked["trl-sdft"] >= 12
    assert checked["sdpo"] > checked["dpo"]  # and the grammar session's demonstrations as the model writes them
    fixed = {(p.error_kind, p.target): p.correction is not None for p in pairs.values()}
    assert fixed[("not_found", "src/app.py")] and fixed[("outside_workspace", "/tmp/t14/app.py")]


async def test_a_grammar_models_corrections_are_trained_as_it_wrote_them(git_repo: Path, script, tmp_path: Path):
    db = tmp_path / "f.db"
    await record_session(git_repo, db, script(*(turn(content=text) for text in GRAMMAR)), tool_mode="grammar")
    export([db], "dpo", tmp_path / "dpo.jsonl", tokenizer="estimate")
    records = [json.loads(line) for line in (tmp_path / "dpo.jsonl").read_text().splitlines()]
    for record in records:
        chosen, rejected = record["chosen"][0]["content"], record["rejected"][0]["content"]
        assert rejected in GRAMMAR  # the failed reply as sampled
        if record["chosen_derived"]:  # the lint fix, composed from util.py's net change: spaced as the model spaces
            assert chosen.startswith('{"name": "edit_file", "arguments": { "path": "util.py", "old_text": ')
            assert chosen.endswith('" }}')
        else:
            assert chosen in GRAMMAR  # the reply that worked, as the model wrote it
    assert any(r["chosen_derived"] for r in records) and not all(r["chosen_derived"] for r in records)


def test_a_fix_an_older_recorder_linked_to_a_failing_call_is_left_out(tmp_path: Path) -> None:
    s = FakeSession().start().user("go")
    s.call("open_file", {"path": "a.py"}, ok=False, error_kind="unknown_tool", result="No tool open_file.")
    s.call("read_file", {"path": "b.py"}, ok=False, error_kind="not_found", target="b.py", result="No b.py.")
    s.call("edit_file", {"path": "a.py"}, target="a.py", edits=[edit("a.py", "a\n", "b\n")])
    store = open_store(tmp_path / "f.db")
    Recorder(store).record_many(s.finish().events)
    # what the recorder did before corrections had to succeed: the next well-formed call closed it
    failing = next(e for e in store.events(s.id) if e["type"] == "tool_call_finished" and e["call_id"] == "call_2")
    with store.write() as conn:
        conn.execute(
            "UPDATE pairs SET correction_seq = 3, correction_event_id = ? WHERE source = 'schema'", (failing["id"],)
        )
    export([store.path], "sdpo", tmp_path / "sdpo.jsonl", tokenizer="estimate")
    records = [json.loads(line) for line in (tmp_path / "sdpo.jsonl").read_text().splitlines()]
    [schema] = [r for r in records if r["source"] == "schema"]
    assert schema["chosen"] is None and schema["chosen_left_out"] == "the fixing call failed"
