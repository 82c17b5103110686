"""Lessons in the store: indexed as pairs are written, distilled (short, deduplicated, redacted),
never from flagged sessions, steerable with `teachback lessons`, budgeted and byte-stable."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import sqlite_utils

from agent.config import Settings
from agent.protocol import UserInput
from agent.runtime import open_session, repository_identity
from cli.entry import main
from feedback_store import Recorder, open_store
from feedback_store.lessons.book import LessonBook, estimate_tokens
from feedback_store.lessons.distill import refresh
from feedback_store.migrations import m001_initial_schema, m002_model_call_renders
from tests.conftest import call, git, turn

BAD = {"path": "app.py", "old_text": "return 'Hi, ' + name", "new_text": "return 'Hey, ' + name"}
GOOD = {"path": "app.py", "old_text": "return 'Hello, ' + name", "new_text": "return 'Hey, ' + name"}
TOKEN = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"


async def record(store, root: Path, model: str, text: str = "go", session=None):
    session = session or open_session(root, Settings(model=model, approval="full-auto", repo_map_tokens=0))
    session.subscribe(Recorder(store))
    await session.run(UserInput(text=text))
    return session


def failure(book: LessonBook, root: Path, **situation):
    defaults = dict(
        tool="edit_file",
        error_kind="no_match",
        target="app.py",
        call="",
        feedback="",
        workspace=str(root.resolve()),
        session_id="another-session",
    )
    return book.for_failure(**{**defaults, **situation})


async def test_a_failure_and_its_fix_become_one_short_lesson(git_repo, script, tmp_path):
    store = open_store(tmp_path / "f.db")
    edits = [call("edit_file", BAD), call("read_file", {"path": "app.py"}), call("edit_file", GOOD)]
    await record(store, git_repo, script(*(turn(c) for c in edits), name="a.json"))
    git(git_repo, "checkout", "app.py")
    await record(store, git_repo, script(*(turn(c) for c in edits), name="b.json"))
    assert (
        store.query("SELECT count(*) AS n FROM pair_search WHERE pair_search MATCH 'target : \"app py\"'")[0]["n"] == 2
    )
    assert refresh(store) == 2
    lessons = store.query("SELECT * FROM lessons")
    assert len(lessons) == 1  # one situation, twice: deduplicated
    text = lessons[0]["text"]
    # What to do first, in the working form; the failed value (the old_text that was not there) nowhere.
    assert text.startswith('Do this: edit_file(path="app.py", old_text="return \'Hello, \' + name"')
    assert "an earlier edit_file failed: no_match, 2 times; copy old_text exactly as read_file shows it" in text
    assert "'Hi, '" not in text
    assert len(text) < 400 and lessons[0]["corrected"] == 2


async def test_a_lesson_quotes_old_text_with_its_whitespace(git_repo, script, tmp_path):
    indented = {"path": "app.py", "old_text": "name):\n    return 'Hello, '", "new_text": "name):\n  return 'Hi, '"}
    edits = [call("edit_file", {**indented, "old_text": "name):\n  return 'Hello, '"}), call("edit_file", indented)]
    store = open_store(tmp_path / "f.db")
    await record(store, git_repo, script(*(turn(c) for c in edits)))
    assert refresh(store) == 1
    text = store.query("SELECT text FROM lessons")[0]["text"]
    # The working old_text exactly as JSON quotes it: its four spaces are four spaces.
    assert "old_text=\"name):\\n    return 'Hello, '\"" in text, text
    assert "new_text=\"name):\\n  return 'Hi, '\"" in text and "\n" not in text


async def test_lessons_are_redacted(git_repo, script, tmp_path, capsys):
    store = open_store(tmp_path / "f.db")
    command = f"no-such-deploy --token {TOKEN}"
    await record(
        store,
        git_repo,
        # The fix, which the lesson shows as the working form, holds the token too.
        script(
            turn(call("run_command", {"command": command})), turn(call("run_command", {"command": f"true {TOKEN}"}))
        ),
    )
    refresh(store)
    [lesson] = store.query("SELECT * FROM lessons")
    assert lesson["target"] == command  # matched against live failures as recorded
    assert TOKEN not in lesson["text"] + lesson["feedback"] and "[REDACTED" in lesson["text"]
    for action in (["list", "--json"], ["show", lesson["id"]]):
        assert main(["lessons", *action, "--db", str(tmp_path / "f.db")]) == 0
        shown = capsys.readouterr().out
        assert "no-such-deploy" in shown and TOKEN not in shown


async def test_flagged_sessions_are_never_retrieved(git_repo, script, tmp_path):
    store = open_store(tmp_path / "f.db")
    edits = [call("edit_file", BAD), call("edit_file", GOOD)]
    session = await record(
        store, git_repo, script(*(turn(c) for c in edits), turn(call("run_command", {"command": "git log -p"})))
    )
    assert store.flags(session.id)
    book = LessonBook(store)
    assert failure(book, git_repo).lessons == ()
    assert book.session_block(str(git_repo.resolve()), "m", 1000).lessons == ()
    assert store.query("SELECT occurrences FROM lessons") in ([], [{"occurrences": 0}])


async def test_a_flag_that_comes_after_distilling_withdraws_the_lesson(git_repo, script, tmp_path):
    store = open_store(tmp_path / "f.db")
    model = script(
        turn(call("edit_file", BAD)),
        turn(call("edit_file", GOOD)),
        turn(content="done"),
        turn(call("read_file", {"path": ".git/ORIG_HEAD"})),
    )
    session = await record(store, git_repo, model)
    book = LessonBook(store)
    refresh(store)  # sessions distil at their start; a failing step only reads
    assert len(failure(book, git_repo).lessons) == 1
    await record(store, git_repo, model, "and now?", session=session)  # the same session reads git internals
    assert store.flags(session.id)
    assert failure(book, git_repo).lessons == ()  # at once, before any new distillation
    refresh(store)
    assert store.query("SELECT occurrences FROM lessons") == [{"occurrences": 0}]


async def test_deleting_a_lesson_removes_it_from_retrieval(git_repo, script, tmp_path, capsys):
    db = tmp_path / "f.db"
    store = open_store(db)
    edits = [call("edit_file", BAD), call("edit_file", GOOD)]
    await record(store, git_repo, script(*(turn(c) for c in edits), name="a.json"))
    book = LessonBook(store)
    refresh(store)
    [lesson] = failure(book, git_repo).lessons
    assert main(["lessons", "delete", lesson.id[:6], "--db", str(db)]) == 0
    assert failure(book, git_repo).lessons == ()
    assert book.session_block(str(git_repo.resolve()), "m", 1000).lessons == ()
    git(git_repo, "checkout", "app.py")
    await record(store, git_repo, script(*(turn(c) for c in edits), name="b.json"))  # the same mistake again
    refresh(store)
    assert failure(book, git_repo).lessons == ()  # deleted stays deleted
    capsys.readouterr()
    assert main(["lessons", "list", "--db", str(db)]) == 0
    assert lesson.id not in capsys.readouterr().out


async def test_start_block_keeps_its_budget_and_is_byte_stable(git_repo, script, tmp_path):
    for i in range(30):
        (git_repo / f"mod{i:02}.py").write_text(f"VALUE_{i} = {i}\n")
    store = open_store(tmp_path / "f.db")
    misses = [
        turn(call("edit_file", {"path": f"mod{i:02}.py", "old_text": f"VALUE_{i} = -1", "new_text": "x"}))
        for i in range(30)
    ]
    await record(store, git_repo, script(*misses))
    workspace, model = str(git_repo.resolve()), f"scripted/{tmp_path / 'script.json'}"
    for budget in (60, 150, 400):
        block = LessonBook(store).session_block(workspace, model, budget)
        assert 0 < block.tokens <= budget and estimate_tokens(block.text) == block.tokens
    big = LessonBook(store).session_block(workspace, model, 400)
    store.close()
    again = LessonBook(open_store(tmp_path / "f.db")).session_block(workspace, model, 400)
    assert again.text.encode() == big.text.encode() and [x.id for x in again.lessons] == [x.id for x in big.lessons]
    assert LessonBook(open_store(tmp_path / "f.db")).session_block(workspace, model, 5).lessons == ()
    focused = LessonBook(open_store(tmp_path / "f.db")).session_block(workspace, model, 150, "Speed up mod27.py")
    assert "edit_file on mod27.py failed" in focused.lessons[0].text  # what the instruction names comes first
    assert "mod27.py" not in big.lessons[0].text


async def test_pinned_lessons_of_your_own_come_first_with_provenance(git_repo, script, tmp_path, capsys):
    db = tmp_path / "f.db"
    store = open_store(db)
    await record(store, git_repo, script(turn(call("edit_file", BAD)), turn(call("edit_file", GOOD))))
    workspace = str(git_repo.resolve())
    assert (
        main(
            [
                "lessons",
                "pin",
                "--db",
                str(db),
                "--workspace",
                workspace,
                "--tool",
                "edit_file",
                "--text",
                "Read the file before editing it.",
            ]
        )
        == 0
    )
    assert main(["lessons", "pin", "--db", str(db), "--workspace", str(tmp_path), "--text", "Elsewhere only."]) == 0
    block = LessonBook(store).session_block(workspace, "m", 1000)
    assert [(x.origin, x.pinned) for x in block.lessons] == [("user", True), ("distilled", False)]
    assert "- (from the user) Read the file before editing it.\n" in block.text and "Elsewhere" not in block.text
    shown = failure(LessonBook(store), git_repo).lessons
    assert [x.origin for x in shown] == ["user", "distilled"]  # a failing edit_file gets the user's rule too
    user_id = block.lessons[0].id
    capsys.readouterr()
    assert main(["lessons", "show", user_id, "--db", str(db)]) == 0
    assert f"for {workspace}" in capsys.readouterr().out
    assert main(["lessons", "edit", block.lessons[1].id, "--db", str(db), "--text", "Copy old_text exactly."]) == 0
    await record(store, git_repo, script(turn(call("edit_file", BAD)), name="again.json"))  # redistilled
    assert LessonBook(store).session_block(workspace, "m", 1000).lessons[1].text == "Copy old_text exactly."
    assert main(["lessons", "show", "Lzzz", "--db", str(db)]) == 1


async def test_team_stores_are_read_after_your_own(git_repo, script, tmp_path):
    team_db = tmp_path / "team.db"
    team = open_store(team_db)
    await record(team, git_repo, script(turn(call("edit_file", BAD)), turn(call("edit_file", GOOD))))
    refresh(team)
    team.close()
    own = open_store(tmp_path / "own.db")
    [lesson] = failure(LessonBook(own, team=[team_db]), git_repo).lessons
    assert lesson.scope == "team"
    assert failure(LessonBook(own, scope="user", team=[team_db]), git_repo).lessons == ()
    assert failure(LessonBook(own, team=[tmp_path / "missing.db"]), git_repo).lessons == ()
    old = tmp_path / "old-team.db"
    sqlite3.connect(old).execute("CREATE TABLE pairs (id TEXT)").connection.commit()  # no lessons tables
    book = LessonBook(own, team=[old, team_db])
    assert [x.scope for x in failure(book, git_repo).lessons] == ["team"]
    assert book.shelves[1].unusable and "no such table" in book.shelves[1].unusable


def test_pairs_recorded_before_the_migration_are_indexed(tmp_path):
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    db = sqlite_utils.Database(conn)
    m001_initial_schema(db)
    m002_model_call_renders(db)
    db.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at REAL)")
    db.execute("INSERT INTO migrations VALUES ('m001_initial_schema', 0), ('m002_model_call_renders', 0)")
    db.execute("INSERT INTO sessions (id, workspace, started_at) VALUES ('s1', '/w', 1)")
    db.execute("""INSERT INTO pairs (id, session_id, source, tool, error_kind, target, feedback, completion_seq,
                  created_at) VALUES ('p1', 's1', 'tool', 'read_file', 'not_found', 'docs/guide.md',
                  'docs/guide.md does not exist.', 1, 1)""")
    conn.close()
    store = open_store(path)
    assert store.query("SELECT rowid FROM pair_search WHERE pair_search MATCH 'guide'") == [{"rowid": 1}]
    assert refresh(store) == 1
    text = store.query("SELECT text FROM lessons")[0]["text"]
    assert text.startswith("Check before calling read_file again: read_file on docs/guide.md failed (not_found)")


async def test_a_lesson_learned_in_one_clone_is_learned_here_in_another_clone_at_another_path(
    git_repo, script, tmp_path
):
    store = open_store(tmp_path / "f.db")
    edits = [call("edit_file", BAD), call("edit_file", GOOD)]
    await record(store, git_repo, script(*(turn(c) for c in edits)))
    clone = tmp_path / "elsewhere" / "clone"
    git(git_repo, "clone", "-q", str(git_repo), str(clone))
    repository = repository_identity(clone)
    assert repository is not None and repository == repository_identity(git_repo)
    assert store.query("SELECT repository FROM sessions") == [{"repository": repository}]
    here = LessonBook(store, scope="workspace")  # only what was learned here
    block = here.session_block(str(clone.resolve()), "m", 1000, repository=repository)
    assert [lesson.scope for lesson in block.lessons] == ["workspace"]
    assert "app.py" in block.lessons[0].text
    found = failure(here, clone, repository=repository)
    assert [lesson.scope for lesson in found.lessons] == ["workspace"]
    # Another repository at that path learned nothing there.
    assert here.session_block(str(clone.resolve()), "m", 1000, repository="git:0000").lessons == ()
    assert failure(here, clone, repository="git:0000").lessons == ()


async def test_lessons_alone_lists_as_list_does(git_repo, script, tmp_path, capsys):
    db = tmp_path / "f.db"
    store = open_store(db)
    await record(store, git_repo, script(turn(call("edit_file", BAD)), turn(call("edit_file", GOOD))))
    outputs = []
    for argv in (
        ["lessons", "--db", str(db)],
        ["lessons", "list", "--db", str(db)],
        ["lessons", "--db", str(db), "list"],
    ):
        assert main(argv) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] == outputs[2] and 'Do this: edit_file(path="app.py"' in outputs[0]


async def test_a_corrected_wrong_path_reaches_the_next_start_block_as_a_habit(git_repo, script, tmp_path):
    store = open_store(tmp_path / "f.db")
    model = script(turn(call("read_file", {"path": "src/app.py"})), turn(call("read_file", {"path": "app.py"})))
    await record(store, git_repo, model)
    other = tmp_path / "other"  # another project, where no file of that name exists
    git(git_repo, "clone", "-q", str(git_repo), str(other))
    (other / "app.py").unlink()
    book = LessonBook(store)
    [lesson] = book.session_block(str(other.resolve()), model, 1000, repository="git:another").lessons
    assert lesson.text.startswith('Do this: read_file(path="app.py")')
    assert "paths are relative to the workspace root" in lesson.text and "src/app.py" not in lesson.text
    # Another model's habits are its own.
    assert book.session_block(str(other.resolve()), "another/model", 1000, repository="git:another").lessons == ()


async def test_a_failure_named_with_a_lone_surrogate_finds_its_lesson(git_repo, script, tmp_path):
    # The model may send text SQLite cannot take; the recorder keeps it with U+FFFD, and the book looks
    # it up so, instead of failing (a traceback in the user's terminal, and no lesson).
    store = open_store(tmp_path / "f.db")
    odd = '{"path": "ap\ud800p.py"}'
    calls = [call("read_file", odd), call("read_file", {"path": "app.py"})]
    await record(store, git_repo, script(*(turn(c) for c in calls)))
    assert refresh(store) == 1
    book = LessonBook(store)
    found = failure(book, git_repo, tool="read_file", error_kind="bad_arguments", target=None, call=odd, feedback=odd)
    assert len(found.lessons) == 1
    assert 'read_file(path="app.py")' in found.text
    named = failure(book, git_repo, tool="read_file", error_kind="not_found", target="ap\ud800p.py", call=odd)
    assert named.lessons == ()  # another situation, looked up without an error
