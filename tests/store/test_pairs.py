"""Each failure is linked to its feedback and correction as the session runs."""

from __future__ import annotations

from pathlib import Path

from feedback_store import Recorder, open_store
from feedback_store.rows import FIX_WINDOW
from tests.store.events import FakeSession, edit, mixed_session


def pairs_of(tmp_path: Path, session: FakeSession, upto: int | None = None):
    store = open_store(tmp_path / "f.db")
    recorder = Recorder(store)
    for event in session.events[:upto]:
        recorder(event)
    return {p.source: p for p in store.pairs()}, store


def call_id(message) -> str:
    return message["tool_calls"][0]["id"]


def test_each_automatic_source_gets_its_correction(tmp_path: Path) -> None:
    pairs, _ = pairs_of(tmp_path, mixed_session())
    assert sorted(pairs) == ["lint", "schema", "test", "tool"]

    tool = pairs["tool"]
    assert (call_id(tool.completion), call_id(tool.correction)) == ("call_1", "call_2")
    assert tool.feedback.startswith("old_text was not found") and tool.error_kind == "no_match"

    schema = pairs["schema"]
    assert (call_id(schema.completion), call_id(schema.correction)) == ("call_3", "call_4")
    assert "Available tools: read_file" in schema.feedback

    test = pairs["test"]  # the edit before the failing run failed; the edits after it fixed it
    assert call_id(test.completion) == "call_2" and call_id(test.correction) == "call_6"
    assert test.target == "pytest -q" and "AssertionError" in test.feedback

    lint = pairs["lint"]
    assert (call_id(lint.completion), call_id(lint.correction)) == ("call_6", "call_7")
    assert "no longer parses" in lint.feedback and "was never closed" in lint.feedback

    for pair in pairs.values():
        assert pair.prompt[-1] != pair.completion
        assert pair.prompt[0] == {"role": "system", "content": "You are a careful coding agent."}
        assert pair.completion["role"] == "assistant" and pair.prompt[-1]["role"] in ("user", "tool")
        assert pair.corrected_at is not None and pair.created_at <= pair.corrected_at


def test_pairs_exist_before_their_correction(tmp_path: Path) -> None:
    session = mixed_session()
    first_fix = next(i for i, e in enumerate(session.events) if getattr(e, "call_id", None) == "call_2")
    pairs, _ = pairs_of(tmp_path, session, upto=first_fix)
    assert list(pairs) == ["tool"] and pairs["tool"].correction is None


def test_a_failure_with_no_fix_keeps_a_null_correction(tmp_path: Path) -> None:
    s = FakeSession().start().user("read it")
    s.call(
        "read_file",
        {"path": "gone.py"},
        ok=False,
        error_kind="not_found",
        target="gone.py",
        result="gone.py does not exist. Files: app.py",
    )
    s.call("edit_file", {"path": "app.py"}, target="app.py")  # another tool: not at the same intent
    s.finish().user("now read it")
    s.call("read_file", {"path": "app.py"}, target="app.py")  # the same tool, but in the next turn
    pairs, _ = pairs_of(tmp_path, s.finish())
    assert pairs["tool"].correction is None and pairs["tool"].target == "gone.py"


def test_a_fix_in_the_same_message_does_not_count(tmp_path: Path) -> None:
    s = FakeSession().start().user("go")
    s.call("bogus", "{}", ok=False, error_kind="unknown_tool", result="No tool bogus.")
    pairs, store = pairs_of(tmp_path, s.finish())
    assert pairs["schema"].correction is None


def test_user_rejection_and_hand_correction(tmp_path: Path) -> None:
    s = FakeSession().start().user("rename greet")
    s.call(
        "edit_file",
        {"path": "a.py"},
        target="a.py",
        edits=[edit("a.py", "def greet(): pass\n", "def hello(): pass\n", edit_id="e1")],
    )
    s.call("edit_file", {"path": "b.py"}, target="b.py", edits=[edit("b.py", "x = 1\n", "x = 2\n", edit_id="e2")])
    s.review("e1", "a.py", "rejected", comment="keep the public name")
    s.review("e2", "b.py", "corrected", comment="use a constant", user_content="X = 2\n")
    store = open_store(tmp_path / "f.db")
    Recorder(store).record_many(s.finish().events)
    rejected, corrected = sorted(store.pairs(source="user"), key=lambda p: p.error_kind, reverse=True)
    assert rejected.error_kind == "rejected" and "keep the public name" in rejected.feedback
    assert call_id(rejected.completion) == "call_1" and rejected.correction is None
    assert corrected.error_kind == "corrected" and call_id(corrected.completion) == "call_2"
    assert corrected.correction == {"role": "assistant", "content": "X = 2\n"}
    assert "-x = 2" in corrected.feedback and "+X = 2" in corrected.feedback
    assert store.query("SELECT decision, comment FROM edits WHERE id = 'e1'") == [
        {"decision": "rejected", "comment": "keep the public name"}
    ]


def test_a_command_the_user_refused_is_user_feedback(tmp_path: Path) -> None:
    s = FakeSession().start().user("clean up")
    s.call(
        "run_command",
        {"command": "rm -rf build"},
        ok=False,
        error_kind="denied",
        target="rm -rf build",
        denied_by_user="never delete build",
        result="The user declined this command; nothing was changed.",
    )
    pairs, _ = pairs_of(tmp_path, s.finish())
    assert pairs["user"].error_kind == "denied" and "never delete build" in pairs["user"].feedback


def test_a_flaky_pass_without_edits_is_not_a_correction(tmp_path: Path) -> None:
    s = FakeSession().start().user("go")
    s.call("edit_file", {"path": "a.py"}, target="a.py", edits=[edit("a.py", "a\n", "b\n")])
    s.call(
        "run_command",
        {"command": "make test"},
        ok=False,
        error_kind="exit_status",
        target="make test",
        result="1 failed",
    )
    s.call("run_command", {"command": "make test"}, target="make test", result="ok")
    pairs, _ = pairs_of(tmp_path, s.finish())
    assert pairs["test"].correction is None


def test_a_failing_command_before_any_edit_is_not_a_pair(tmp_path: Path) -> None:
    s = FakeSession().start().user("go")
    s.call("run_command", {"command": "pytest"}, ok=False, error_kind="exit_status", target="pytest", result="1 failed")
    pairs, _ = pairs_of(tmp_path, s.finish())
    assert pairs == {}


def test_filters(tmp_path: Path) -> None:
    store = open_store(tmp_path / "f.db")
    old = mixed_session(model="m/old")
    new = mixed_session(model="m/new")
    new.events = [type(e)(**{**e.__dict__, "ts": e.ts + 86_400 * 30}) for e in new.events]
    Recorder(store).record_many(old.events + new.events)
    assert len(store.pairs()) == 8
    assert {p.source for p in store.pairs(source="lint")} == {"lint"}
    assert {p.tool for p in store.pairs(tool="run_command")} == {"run_command"}
    assert {p.model for p in store.pairs(model="m/new")} == {"m/new"}
    assert {p.model for p in store.pairs(since=old.ts + 86_400)} == {"m/new"}
    assert store.count_pairs(source="schema") == 2


def test_a_schema_error_is_corrected_by_the_next_call_that_succeeded_never_by_a_failing_one(tmp_path: Path) -> None:
    s = FakeSession().start().user("read the app")
    s.call("open_file", {"path": "app.py"}, ok=False, error_kind="unknown_tool", result="There is no tool open_file.")
    s.call("read_file", {"path": "src/app.py"}, ok=False, error_kind="not_found", target="src/app.py", result="gone")
    s.call("read_file", {"path": "app.py"}, target="app.py", result="print('Hello')\n")
    s.call("read_file", {"path": "app.py"}, ok=False, error_kind="repeated_call", target="app.py", result="Again.")
    s.call("edit_file", {"path": "app.py"}, ok=False, error_kind="no_match", target="app.py", result="No match.")
    s.call("run_command", {"command": "pytest"}, ok=False, error_kind="exit_status", target="pytest", result="1 failed")
    s.call("search", {"pattern": "Hello"}, target="Hello", result="app.py:1: print('Hello')")
    pairs, store = pairs_of(tmp_path, s.finish())
    fixes = {call_id(p.completion): p.correction and call_id(p.correction) for p in store.pairs()}
    # the failing read and the failing edit are pairs of their own, not corrections
    assert fixes == {"call_1": "call_3", "call_2": "call_3", "call_4": "call_7", "call_5": None}
    for pair in store.pairs():
        if pair.correction is not None:
            [finished] = [
                e
                for e in store.events(pair.session_id)
                if e["type"] == "tool_call_finished" and e["call_id"] == call_id(pair.correction)
            ]
            assert finished["ok"] is True  # a correction is a call that succeeded when it was made


def test_deleting_a_file_corrects_no_mistake_of_another_tool(tmp_path: Path) -> None:
    """A file deleted after a failed edit or a repeated read is not what fixed them (the demo's
    embedded model once "corrected" an edit with identical texts by deleting the file); the next
    call that succeeded without deleting anything is."""
    s = FakeSession().start().user("lowercase the slug")
    same = {"path": "slug.py", "old_text": "x", "new_text": "x"}
    s.call("edit_file", same, ok=False, error_kind="bad_arguments", target="slug.py", result="identical")
    s.call("read_file", {"path": "slug.py"}, target="slug.py", result="def slugify(title): ...")
    s.call("read_file", {"path": "slug.py"}, ok=False, error_kind="repeated_call", target="slug.py", result="Again.")
    gone = edit("slug.py", "def slugify(title): ...\n", "", kind="delete")
    s.call("delete_file", {"path": "slug.py"}, target="slug.py", result="Deleted slug.py.", edits=[gone])
    s.call(
        "write_file", {"path": "slug.py"}, target="slug.py", result="Wrote slug.py.", edits=[edit("slug.py", "", "x\n")]
    )
    s.call("delete_file", {"path": "old.py"}, ok=False, error_kind="not_found", target="old.py", result="No old.py.")
    gone = edit("old.py", "y\n", "", kind="delete")
    s.call("delete_file", {"path": "lib/old.py"}, target="lib/old.py", result="Deleted.", edits=[gone])
    _, store = pairs_of(tmp_path, s.finish())
    fixes = {call_id(p.completion): p.correction and call_id(p.correction) for p in store.pairs()}
    # the schema error's fix is the read after it; the repeat's is the write, not the deletion before
    # it; a failed deletion is fixed by a deletion of its own tool
    assert fixes == {"call_1": "call_2", "call_3": "call_5", "call_6": "call_7"}


def test_a_wrong_path_is_corrected_by_the_same_tool_on_the_real_path(tmp_path: Path) -> None:
    s = FakeSession().start().user("lowercase the slug")
    s.call(
        "read_file",
        {"path": "/tmp/t14/slugify.py"},
        ok=False,
        error_kind="outside_workspace",
        target="/tmp/t14/slugify.py",
        result="'/tmp/t14/slugify.py' is outside the workspace.",
    )
    s.call("run_command", {"command": "ls"}, target="ls", result="textkit\n")  # another tool: not the fix
    s.call("read_file", {"path": "textkit/slug.py"}, target="textkit/slug.py", result="def slugify(title): ...")
    # a wrong path whose tool succeeds only after the window (FIX_WINDOW messages) stays uncorrected
    s.call("read_file", {"path": "slug.py"}, ok=False, error_kind="not_found", target="slug.py", result="No slug.py.")
    for _ in range(FIX_WINDOW):
        s.call("run_command", {"command": "ls"}, target="ls", result="textkit\n")
    s.call("read_file", {"path": "textkit/words.py"}, target="textkit/words.py", result="def word_count(text): ...")
    pairs, store = pairs_of(tmp_path, s.finish())
    outside, late = sorted(store.pairs(source="tool"), key=lambda p: p.created_at)
    assert outside.error_kind == "outside_workspace" and call_id(outside.correction) == "call_3"
    assert late.error_kind == "not_found" and late.correction is None
    assert store.query("SELECT closes_on FROM pairs WHERE id = ?", (late.id,)) == [{"closes_on": None}]
