"""The lessons measurement's instrument: a task attempted twice, the first session's lessons shown at
the second session's states as the session would show them, each wording, and what a sample is
counted as (a repeat of the first session's failure, a copy of a quoted wrong value)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from feedback_store import open_store
from feedback_store.lessons.book import LessonBook
from tasks.lesson_replay import WORDINGS, copies, lesson_rows, recorded, repeats, with_lessons
from tasks.rollout import run_attempt
from tasks.sample_suite import sample_suite_path
from tasks.states import Scratch, label_reply, load_states
from tests.conftest import call, turn
from tests.tasks.test_rollout import FINISH, sample_task, spec
from tests.tasks.test_states import reply

WRONG_PATH = "src/textkit/words.py"
GUESSES = [
    turn(call("read_file", {"path": WRONG_PATH})),
    turn(call("read_file", {"path": "textkit/words.py"})),
    FINISH,
]


def test_the_first_sessions_lessons_reach_the_second_sessions_states_in_each_wording(script, tmp_path: Path) -> None:
    model = script(*GUESSES)
    first_db, second_db = tmp_path / "first.db", tmp_path / "second.db"
    for attempt, db in ((0, first_db), (1, second_db)):  # two attempts: two folders, one repository
        assert "error" not in run_attempt(spec(model, db, attempt=attempt, work_dir=str(tmp_path / "w")))
    book = LessonBook(open_store(first_db), owns_store=True)
    try:
        (first_id,) = book.store.task_sessions()
        first = recorded(book.store.events(first_id)).failures
        assert first == {("read_file", "not_found", WRONG_PATH)}
        rows = lesson_rows(book)
        store = open_store(second_db)
        (second_id,) = store.task_sessions()
        session = recorded(store.events(second_id))
        store.close()
        assert session.repository and session.repository.startswith("git:")
        states = load_states(second_db)
        assert [s.step for s in states] == [1, 2, 3]
        task = sample_task(states[0].task_id)
        scratch = Scratch(states[0], task, sample_suite_path())
        try:
            shown = {w: with_lessons(states[0], session, book, rows, w, scratch.root) for w in WORDINGS}
            for wording, found in shown.items():  # the start block: learned in another clone of this repository
                assert len(found.lessons) == 1, wording
                assert found.messages[0]["content"].startswith(states[0].messages[0]["content"])
                assert found.messages[0]["content"].endswith(found.lessons[0].text + "\n")
                assert found.messages[1:] == states[0].messages[1:] and found.tokens > 0
            assert shown["prescriptive"].lessons[0].text.startswith('Do this: read_file(path="textkit/words.py")')
            assert shown["fix_only"].lessons[0].text == 'Do this: read_file(path="textkit/words.py").'
            assert shown["descriptive"].lessons[0].text.startswith(f"`read_file` on {WRONG_PATH} failed")
            # Only the wording that leads with the failed path quotes it.
            assert shown["descriptive"].quoted == {("read_file", WRONG_PATH)}
            assert not shown["prescriptive"].quoted and not shown["fix_only"].quoted
            # A sample that guesses the same wrong path repeats the first session's failure (and copies
            # the quoted value); the working call does neither.
            again = reply(call("read_file", {"path": WRONG_PATH}))
            label = asyncio.run(label_reply(states[0], again, scratch.copy("a"), task, sample_suite_path(), cap=96))
            assert label.kind == "not_found" and label.failures == (("read_file", "not_found", WRONG_PATH),)
            assert repeats(label, first) and copies([("read_file", WRONG_PATH)], shown["descriptive"].quoted)
            right = asyncio.run(
                label_reply(
                    states[0], reply(call("read_file", {"path": "textkit/words.py"})), scratch.copy("b"), task,
                    sample_suite_path(), cap=96,
                )
            )  # fmt: skip
            assert right.kind == "ok" and not right.failures and not repeats(right, first)
        finally:
            scratch.close()
        # After the second session's own failed call, its tool message carries the failure's lessons too.
        scratch = Scratch(states[1], task, sample_suite_path())
        try:
            later = with_lessons(states[1], session, book, rows, "prescriptive", scratch.root)
        finally:
            scratch.close()
        failed = [m for m in later.messages if m.get("role") == "tool"]
        assert len(failed) == 1 and "Lessons from earlier sessions about failures like this one" in failed[0]["content"]
        assert len(later.lessons) == 2 and later.tokens > shown["prescriptive"].tokens
    finally:
        book.close()
