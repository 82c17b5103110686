"""The fitting correction takes the fixing call from the canonical form the export keeps of the
correction (its arguments read once) and comes out as it does when it reads them itself."""

from __future__ import annotations

from pathlib import Path

from feedback_store import Recorder, open_store
from feedback_store.export.corrections import Workspace, fitting_correction
from feedback_store.export.views import Memo, canonical_message, tool_names
from tests.store.events import TOOLS, FakeSession


def session() -> FakeSession:
    """Two edits that fail and the two that fix them."""
    s = FakeSession().start().user("task")
    for step in range(1, 5):
        ok = step % 2 == 0
        s.call(
            "edit_file",
            {"path": "app.py", "old_text": f"v = {step}", "new_text": f"v = {step + 1}"},
            ok=ok,
            result="Edited app.py." if ok else "old_text was not found in app.py.",
            error_kind=None if ok else "no_match",
            target="app.py",
        )
    return s.finish()


def test_the_fixing_call_comes_from_the_kept_canonical_form(tmp_path: Path) -> None:
    store = open_store(tmp_path / "f.db")
    Recorder(store).record_many(session().events)
    pairs = store.pairs()
    assert len(pairs) == 2 and all(p.correction is not None for p in pairs)
    memo, asked = Memo(), []

    def canonical(message: dict) -> dict:
        asked.append(message)
        return memo.get(message, lambda m: canonical_message(m, tool_names(TOOLS)))

    for pair in pairs:
        alone = fitting_correction(Workspace(store), pair)
        kept = fitting_correction(Workspace(store), pair, canonical)
        assert kept == alone and kept.message is not None
        assert asked[-1] is pair.correction
        assert kept.message["tool_calls"][0] is canonical(pair.correction)["tool_calls"][0]  # not read again
    store.close()
