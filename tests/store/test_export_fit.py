"""Every `chosen` (dpo) and sft completion is a valid replacement for the failed turn: it applies
cleanly to the workspace as it was at the prompt's end, replayed from the recorded events."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent.config import Settings
from agent.protocol import UserInput
from agent.runtime import open_session
from feedback_store import Recorder, open_store
from feedback_store.export.corrections import minimal_edit
from feedback_store.export.export import export
from tests.conftest import call, turn
from tests.store.events import FakeSession, edit

pytestmark = pytest.mark.timeout(180)

CHECK = f"{sys.executable} -c \"from app import greet; assert greet('x') == 'Hello, x', greet('x')\""


def session_a(script) -> str:
    return script(
        turn(
            call("edit_file", {"path": "app.py", "old_text": "return 'Hi, ' + name", "new_text": "return 'Hey'"}, "a1")
        ),
        turn(
            call(
                "edit_file",
                {"path": "app.py", "old_text": "return 'Hello, ' + name", "new_text": "return f'Hello, {name}!'"},
                "a2",
            )
        ),
        turn(call("open_file", {"path": "util.py"}, "a3")),
        turn(call("read_file", {"path": "util.py"}, "a4")),
        # a lint failure whose fix edits text that exists only after the broken edit
        turn(
            call(
                "edit_file",
                {"path": "util.py", "old_text": "    return a + b\n", "new_text": "    return (a + b\n"},
                "a5",
            )
        ),
        turn(
            call(
                "edit_file",
                {"path": "util.py", "old_text": "    return (a + b\n", "new_text": "    return (a + b) * 1\n"},
                "a6",
            )
        ),
        # a failing check after the util.py edit, fixed in app.py: one call cannot replace that turn
        turn(call("run_command", {"command": CHECK}, "a7")),
        turn(call("edit_file", {"path": "app.py", "old_text": "{name}!'", "new_text": "{name}'"}, "a8")),
        turn(call("run_command", {"command": CHECK}, "a9")),
        turn(call("finish", {"summary": "done"}, "a10")),
        name="a.json",
    )


def session_b(script) -> str:
    return script(
        turn(call("edit_file", {"path": "app.py", "old_text": "'Hello, '", "new_text": "'Hello '"}, "b1")),
        turn(call("run_command", {"command": CHECK}, "b2")),
        turn(
            call(
                "edit_file",
                {"path": "app.py", "old_text": "'Hello ' + name", "new_text": "'Hello, ' + name + ''"},
                "b3",
            )
        ),
        turn(call("run_command", {"command": CHECK}, "b4")),
        turn(call("finish", {"summary": "done"}, "b5")),
        name="b.json",
    )


async def record_session(repo: Path, model: str, db: Path) -> None:
    store = open_store(db)
    session = open_session(repo, Settings(model=model, approval="full-auto", repo_map_tokens=0), frontend="test")
    session.subscribe(Recorder(store))
    await session.run(UserInput(text="Make greet use an f-string and tidy util.py"))
    store.close()


def initial_files(repo: Path) -> dict[str, str]:
    names = subprocess.run(["git", "ls-files"], cwd=repo, capture_output=True, text=True, check=True).stdout.split()
    return {
        n: subprocess.run(["git", "show", f"HEAD:{n}"], cwd=repo, capture_output=True, text=True, check=True).stdout
        for n in names
    }


def workspace_at(store, session_id: str, seq: int, initial: dict[str, str]) -> dict[str, str]:
    """The files just before message `seq`: the initial files with every recorded edit before it."""
    events = store.events(session_id)
    message_event = store.query("SELECT event_id FROM messages WHERE session_id = ? AND seq = ?", (session_id, seq))
    stop = message_event[0]["event_id"]
    files = dict(initial)
    for event in events:
        if event["id"] == stop:
            break
        if event["type"] == "edit_applied":
            files.pop(event["path"], None)
            if event["after"] is not None:
                files[event["new_path"] or event["path"]] = event["after"]
    return files


def apply(call: dict, files: dict[str, str]) -> dict[str, str]:
    """Apply one chosen call as the tools would, asserting that it applies cleanly."""
    name, args = call["function"]["name"], call["function"]["arguments"]
    assert isinstance(args, dict), "a derived correction's arguments are a JSON object"
    out = dict(files)
    if name == "edit_file":
        assert files[args["path"]].count(args["old_text"]) == 1, (args, files[args["path"]])
        out[args["path"]] = files[args["path"]].replace(args["old_text"], args["new_text"], 1)
    elif name == "create_file":
        assert args["path"] not in files
        out[args["path"]] = args["content"]
    elif name == "read_file":
        assert args["path"] in files
    return out


async def test_every_chosen_applies_cleanly_to_its_prompts_workspace(git_repo: Path, script, tmp_path: Path) -> None:
    initial = initial_files(git_repo)
    db = tmp_path / "f.db"
    await record_session(git_repo, session_a(script), db)
    subprocess.run(["git", "checkout", "-q", "--", "."], cwd=git_repo, check=True)
    await record_session(git_repo, session_b(script), db)
    store = open_store(db)
    pairs = {p.id: p for p in store.pairs()}
    assert sorted(p.source for p in pairs.values()) == ["lint", "schema", "test", "test", "tool"]

    result = export([db], "dpo", tmp_path / "dpo.jsonl", tokenizer="estimate")
    records = [json.loads(line) for line in (tmp_path / "dpo.jsonl").read_text().splitlines()]
    assert result.left_out == {"fix changed other files too": 1}  # session a's test pair
    assert sorted(r["source"] for r in records) == ["lint", "schema", "test", "tool"]
    for record in records:
        pair = pairs[record["id"]]
        files = workspace_at(store, pair.session_id, len(pair.prompt), initial)
        chosen = record["chosen"][0]["tool_calls"][0]
        after = apply(chosen, files)
        if record["source"] in ("lint", "test"):
            ast.parse(after[chosen["function"]["arguments"]["path"]])  # the replacement leaves valid code
        if record["source"] == "test":
            check = tmp_path / "check"
            check.mkdir()
            for name, text in after.items():
                (check / name).write_text(text)
            assert subprocess.run(CHECK, shell=True, cwd=check).returncode == 0

    lint = next(r for r in records if r["source"] == "lint")
    assert lint["chosen"][0]["tool_calls"][0]["function"]["arguments"] == {
        "path": "util.py",
        "old_text": "    return a + b\n",
        "new_text": "    return (a + b) * 1\n",
    }
    assert lint["rejected"][0]["tool_calls"][0]["id"] == "a5" and lint["chosen"][0]["tool_calls"][0]["id"] == "a6"

    sft = export([db], "sft", tmp_path / "sft.jsonl", tokenizer="estimate")
    sft_records = [json.loads(line) for line in (tmp_path / "sft.jsonl").read_text().splitlines()]
    assert sft.records == 4
    assert {r["id"]: r["completion"] for r in sft_records} == {r["id"]: r["chosen"] for r in records}


def test_a_hand_correction_becomes_one_edit_from_the_agents_starting_point(tmp_path: Path) -> None:
    s = FakeSession().start().user("tidy b.py")
    s.call(
        "edit_file",
        {"path": "b.py", "old_text": "x = 1", "new_text": "x = 2"},
        target="b.py",
        edits=[edit("b.py", "a = 0\nx = 1\nz = 3\n", "a = 0\nx = 2\nz = 3\n", edit_id="e1")],
    )
    s.review("e1", "b.py", "corrected", user_content="a = 0\nX = 2\nz = 3\n")
    s.call(
        "create_file",
        {"path": "c.py", "content": "y"},
        ok=False,
        error_kind="bad_arguments",
        target="c.py",
        result="create_file needs content as a string",
    )
    s.call(
        "create_file",
        {"path": "c.py", "content": "y = 1\n"},
        target="c.py",
        edits=[{"path": "c.py", "before": None, "after": "y = 1\n", "diff": "+y = 1\n", "kind": "create"}],
    )
    store = open_store(tmp_path / "f.db")
    Recorder(store).record_many(s.finish().events)
    export([store.path], "dpo", tmp_path / "dpo.jsonl", tokenizer="estimate")
    records = {
        json.loads(line)["source"]: json.loads(line) for line in (tmp_path / "dpo.jsonl").read_text().splitlines()
    }
    user = records["user"]["chosen"][0]["tool_calls"][0]["function"]["arguments"]
    assert user == {"path": "b.py", "old_text": "x = 1\n", "new_text": "X = 2\n"}
    schema = records["schema"]["chosen"][0]["tool_calls"][0]["function"]
    assert schema == {"name": "create_file", "arguments": {"path": "c.py", "content": "y = 1\n"}}
    for record in records.values():
        pair = next(p for p in store.pairs() if p.id == record["id"])
        firsts = {}
        for e in store.events(pair.session_id):
            if e["type"] == "edit_applied" and e["before"] is not None:
                firsts.setdefault(e["path"], e["before"])
        apply(record["chosen"][0]["tool_calls"][0], workspace_at(store, pair.session_id, len(pair.prompt), firsts))


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        ("a\nb\nc\n", "a\nB\nc\n", ("b\n", "B\n")),
        ("x\nx\ny\n", "x\nx\nY\n", ("y\n", "Y\n")),
        ("x\nx\n", "x\nz\nx\n", ("x\nx\n", "x\nz\nx\n")),  # widened until old_text is unique
        ("same\nsame\n", "same\n", ("same\nsame\n", "same\n")),
        ("", "new\n", None),  # an empty file has no old_text to match
    ],
)
def test_minimal_edit(before: str, after: str, expected: tuple[str, str] | None) -> None:
    edit = minimal_edit(before, after)
    assert edit == expected
    if edit is not None:
        assert before.count(edit[0]) == 1 and before.replace(*edit, 1) == after
