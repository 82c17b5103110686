"""No exported field names the user's workspace folder: in every format, with redaction on or
off, the folder becomes the placeholder root (`/workspace/app.py`), and a neighbouring folder that
only starts with the same name is left as it is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.entry import main
from feedback_store import Recorder, open_store
from feedback_store.content.renders import Render
from feedback_store.export.export_io import scrub_render
from feedback_store.export.format_table import FORMATS, TRAJECTORIES
from feedback_store.export.unroot import PLACEHOLDER_ROOT, Unrooted, root_pattern
from feedback_store.rows import Pair
from tests.store.events import FakeSession, edit

pytestmark = pytest.mark.timeout(120)

HOME = "/home/alex/work/shop"  # where the session ran, as an imported session records it
SIBLING = f"{HOME}-old/notes.txt"  # another folder: not the workspace


def imported_session() -> FakeSession:
    """A session whose tools took absolute paths, and whose texts name the folder everywhere: the
    user's instruction, arguments, feedback in the wording of earlier versions, a command's output."""
    s = FakeSession(model="m/one").start(workspace=HOME).user(f"Fix the greeting in {HOME}/app.py; notes: {SIBLING}.")
    s.call(
        "read_file",
        {"path": "/srv/shop/app.py"},
        ok=False,
        error_kind="outside_workspace",
        target="/srv/shop/app.py",
        result=f"'/srv/shop/app.py' is outside the workspace {HOME}. Use a path relative to the workspace root.",
    )
    s.call("read_file", {"path": f"{HOME}/app.py"}, target="app.py", result="print('Hi')\n")
    s.call(
        "edit_file",
        {"path": f"{HOME}/app.py", "old_text": "Hello"},
        ok=False,
        error_kind="no_match",
        target="app.py",
        result=f"old_text was not found in {HOME}/app.py. Closest: 'Hi'",
    )
    s.call(
        "edit_file",
        {"path": f"{HOME}/app.py", "old_text": "Hi", "new_text": "Hello"},
        target="app.py",
        edits=[edit("app.py", "print('Hi')\n", "print('Hello')\n")],
    )
    s.call(
        "run_command",
        {"command": f"cd {HOME} && pytest -q"},
        ok=False,
        error_kind="exit_status",
        target="pytest -q",
        result=f"rootdir: {HOME}\nFAILED {HOME}/tests/test_app.py::test_greet (see {SIBLING}).",
    )
    s.call("run_command", {"command": f"cd {HOME} && pytest -q"}, target="pytest -q", result="1 passed")
    s.call("finish", {"summary": f"Fixed {HOME}/app.py."}, result="Finished.")
    return s.finish()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "f.db"
    store = open_store(path)
    Recorder(store).record_many(imported_session().events)
    store.close()
    return path


def exported_text(path: Path) -> str:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return json.dumps(pq.read_table(path).to_pylist(), default=str)
    return path.read_text(encoding="utf-8")


@pytest.mark.parametrize("redaction", [[], ["--no-redact"]], ids=["redacted", "not-redacted"])
@pytest.mark.parametrize("fmt", [*FORMATS, TRAJECTORIES.kind])
def test_no_exported_field_names_the_workspace_folder(db: Path, tmp_path: Path, fmt: str, redaction, capsys) -> None:
    out = tmp_path / "out" / f"records{FORMATS[fmt].suffix if fmt in FORMATS else '.jsonl'}"
    argv = ["export", "--db", str(db), "--format", fmt, "--out", str(out), "--include-flagged", *redaction]
    assert main(argv) == 0, capsys.readouterr().err
    text = exported_text(out)
    assert HOME not in text.replace(SIBLING, "")
    assert f"{PLACEHOLDER_ROOT}/app.py" in text  # still a path, under the placeholder root
    assert SIBLING in text  # a folder that only starts like the workspace is not the workspace


def test_a_render_that_named_the_folder_loses_its_token_ids() -> None:
    """Token ids would spell the folder out: as with a redacted secret, they are left out."""
    render = Render(
        tool_mode="text",
        messages=[{"role": "user", "content": f"open {HOME}/app.py"}],
        prompt_token_ids=[1, 2, 3],
        completion_token_ids=[4, 5],
        logprobs=[{"token": "x", "logprob": -0.1}],
    )
    pattern = root_pattern([HOME])
    assert pattern is not None
    pair = Pair(
        id="p",
        session_id="s",
        source="tool",
        tool="read_file",
        error_kind="not_found",
        target="app.py",
        feedback="no",
        prompt=[],
        completion={"role": "assistant", "content": "x"},
        correction=None,
        tools=[],
        model="m",
        created_at=0.0,
        corrected_at=None,
        flagged=False,
    )
    clean = scrub_render(render, pair, pair, Unrooted(None, pattern))
    assert clean is not None and clean.messages == [{"role": "user", "content": f"open {PLACEHOLDER_ROOT}/app.py"}]
    assert (clean.prompt_token_ids, clean.completion_token_ids, clean.logprobs) == (None, None, None)
    untouched = Render("text", [{"role": "user", "content": "open app.py"}], [1], [2], None)
    assert scrub_render(untouched, pair, pair, Unrooted(None, pattern)) == untouched
