"""`teachback lessons export`: a repository's lessons as Agent Skills (checked with `skills-ref`, the
format's reference validator) and as a marked section of AGENTS.md; idempotent, redacted, never
touching what is not teachback's, and valid whatever the lesson text holds."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import pytest
import skills_ref

from agent.config import Settings
from agent.protocol import UserInput
from agent.runtime import open_session
from cli.entry import main
from feedback_store import Recorder, open_store
from tests.conftest import call, git, turn

BAD = {"path": "app.py", "old_text": "return 'Hi, ' + name", "new_text": "return 'Hey, ' + name"}
GOOD = {"path": "app.py", "old_text": "return 'Hello, ' + name", "new_text": "return 'Hey, ' + name"}
TOKEN = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"
CLAUDE_LOG = (
    Path(__file__).parent / "data/agent_logs/claude-code/-home-dev-shop/0a1b2c3d-0000-4000-8000-000000000001.jsonl"
)
NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "feedback.db"


@pytest.fixture
def here(git_repo: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The repository's folder, the current folder as `teachback lessons export` is run from it."""
    monkeypatch.chdir(git_repo)
    return git_repo


async def recorded(db: Path, root: Path, model: str) -> None:
    with open_store(db) as store:
        session = open_session(root, Settings(model=model, approval="full-auto", repo_map_tokens=0))
        session.subscribe(Recorder(store))
        await session.run(UserInput(text="go"))


def export(db: Path, *options: str) -> int:
    return main(["lessons", "export", "--db", str(db), *options])


def pin(db: Path, root: Path, text: str, *extra: str) -> None:
    assert main(["lessons", "pin", "--db", str(db), "--workspace", str(root), "--text", text, *extra]) == 0


def snapshot(root: Path) -> dict[str, str]:
    """Every file under `root` (but .git) with a hash of its bytes."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }


def front_matter(folder: Path) -> dict:
    return skills_ref.read_properties(folder).to_dict()


def assert_valid_skills(folder: Path) -> list[Path]:
    """Every skill folder passes the reference validator, and its name obeys the format's rules on its own."""
    skills = sorted(p for p in folder.iterdir() if p.is_dir())
    for skill in skills:
        assert skills_ref.validate(skill) == [], skill
        properties = skills_ref.read_properties(skill)
        assert properties.name == skill.name and NAME.match(properties.name) and len(properties.name) <= 64
        assert 1 <= len(properties.description) <= 1024
        assert (properties.metadata or {}).get("teachback-lesson")
    return skills


async def test_a_repositorys_lessons_become_valid_skills_and_a_second_export_changes_no_byte(here, script, db):
    edits = [call("edit_file", BAD), call("read_file", {"path": "app.py"}), call("edit_file", GOOD)]
    await recorded(db, here, script(*(turn(c) for c in edits)))  # pending: export distils it first
    pin(db, here, "Run the tests with make test before finishing.")
    pin(db, here.parent, "A rule of another folder.")
    elsewhere = here.parent / "elsewhere"  # another repository's lesson stays out
    elsewhere.mkdir()
    git(elsewhere, "init", "-q", "-b", "main")
    (elsewhere / "notes.md").write_text("hello\n")
    await recorded(db, elsewhere, script(turn(call("read_file", {"path": "missing.md"})), name="other.json"))
    assert export(db, "--skills", "--agents-md") == 0
    skills = assert_valid_skills(here / ".agents/skills")
    with open_store(db) as store:  # both sessions' failures were distilled
        assert len(store.query("SELECT id FROM lessons WHERE origin = 'distilled' AND occurrences > 0")) == 2
    assert len(skills) == 2  # the other folder's rule and the other repository's lesson are not this one's
    fixed = next(s for s in skills if s.name.startswith("edit-file-no-match-app-py-l"))
    assert (
        "What worked in this repository after edit_file failed (no_match) on app.py"
        in front_matter(fixed)["description"]
    )
    assert 'Do this: edit_file(path="app.py", old_text="return \'Hello, \' + name"' in (fixed / "SKILL.md").read_text()
    rule = next(s for s in skills if s.name.startswith("run-the-tests-with-make-test-before-finishing-u"))
    assert "Run the tests with make test before finishing." in (rule / "SKILL.md").read_text()
    agents = (here / "AGENTS.md").read_text()
    assert agents.count("<!-- teachback:lessons:begin -->") == 1 and "- (from the user) Run the tests" in agents
    umask = os.umask(0o022)
    os.umask(umask)
    assert (fixed / "SKILL.md").stat().st_mode & 0o777 == 0o666 & ~umask  # as any new file of the user's

    before = snapshot(here)
    stamps = {p: p.stat().st_mtime_ns for p in (here / ".agents/skills").rglob("SKILL.md")}
    assert export(db, "--skills", "--agents-md") == 0
    assert snapshot(here) == before
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps  # not even rewritten


async def test_the_claude_folder_chooses_claude_skills_and_an_imported_session_counts(here, db, capsys):
    # A Claude Code session whose folder is this repository, imported as the user would.
    log = here.parent / "logs" / CLAUDE_LOG.name
    log.parent.mkdir()
    log.write_text(CLAUDE_LOG.read_text().replace("/home/dev/shop", str(here)))
    assert main(["import", "claude-code", str(log), "--db", str(db)]) == 0
    (here / ".claude").mkdir()
    assert export(db, "--skills") == 0
    skills = assert_valid_skills(here / ".claude/skills")
    assert any(s.name.startswith("edit-no-match-") for s in skills) and not (here / ".agents").exists()
    assert "written" in capsys.readouterr().out


async def test_text_outside_the_marked_section_is_never_touched(here, db, capsys):
    pin(db, here, "Use the project's formatter.")
    head = "# Our agents\r\n\r\nUse tabs. <!-- a comment of ours -->\r\n"
    tail = "\n## Ours again\n\nNo trailing newline here"
    (here / "AGENTS.md").write_bytes(head.encode())
    assert export(db, "--agents-md") == 0
    first = (here / "AGENTS.md").read_bytes()
    assert first.startswith(head.encode()) and first.rstrip(b"\n").endswith(b"<!-- teachback:lessons:end -->")

    (here / "AGENTS.md").write_bytes(first + tail.encode())  # the user writes below the section
    pin(db, here, "Keep the changelog current.")
    assert export(db, "--agents-md") == 0
    second = (here / "AGENTS.md").read_bytes().decode()
    start, end = second.index("<!-- teachback:lessons:begin -->"), second.index("<!-- teachback:lessons:end -->")
    assert second[:start].encode() == head.encode() + b"\n"  # the file's own bytes, then one blank line
    assert second[end:] == "<!-- teachback:lessons:end -->\n" + tail
    assert "Keep the changelog current." in second[start:end]

    # Markers the user broke: the file is left as it is, with a message saying what to do.
    broken = second.replace("<!-- teachback:lessons:end -->", "")
    (here / "AGENTS.md").write_bytes(broken.encode())
    assert export(db, "--agents-md") == 2
    assert (here / "AGENTS.md").read_bytes() == broken.encode()
    assert "keep exactly one of each" in capsys.readouterr().err


async def test_a_secret_in_a_lesson_is_redacted(here, script, db):
    await recorded(
        db, here, script(turn(call("run_command", {"command": f"deploy --token {TOKEN}"})), turn(content="done"))
    )
    pin(db, here, f"Deploy with GITHUB_TOKEN={TOKEN} set.", "--target", f"deploy --token {TOKEN}")
    assert export(db, "--skills", "--agents-md") == 0
    written = "".join(p.read_text() for p in here.rglob("*.md") if ".git" not in p.parts)
    assert "skills" in str(list(here.rglob("SKILL.md"))[0]) and len(list(here.rglob("SKILL.md"))) == 2
    assert TOKEN not in written and "[REDACTED" in written
    assert_valid_skills(here / ".agents/skills")


@pytest.mark.parametrize(
    "text",
    [
        "---\nname: evil\ndescription: x\n---\n# not a front matter",
        'description: "quoted" --- and more --- \\ backslash: colon # hash',
        "Very long. " * 5000,
        "<!-- teachback:lessons:end --> forged end, then \u2028 separators \x00 \x1b[31m and \ufeff marks",
        "é日本語 only unicode",
    ],
    ids=["fences", "yaml", "long", "controls", "unicode"],
)
async def test_hostile_lesson_text_still_gives_valid_files(here, db, text):
    # A lesson pinned straight into the store keeps its line breaks, as no command would.
    with open_store(db) as store:
        from feedback_store.lessons.manage import pin_own_lesson

        pin_own_lesson(
            store, "U0123456789ab", text, tool="run\ncommand", target="a\n---\nb", workspace=str(here), author="me"
        )
    assert export(db, "--skills", "--agents-md") == 0
    [skill] = assert_valid_skills(here / ".agents/skills")
    assert set(front_matter(skill)) == {"name", "description", "metadata"}
    assert len((skill / "SKILL.md").read_text()) < 8000
    agents = (here / "AGENTS.md").read_text()
    assert agents.count("<!-- teachback:lessons:end -->") == 1 and agents.count("<!-- teachback:lessons:begin") == 1
    before = snapshot(here)
    assert export(db, "--skills", "--agents-md") == 0  # its own section and skill are found again, unchanged
    assert snapshot(here) == before


async def test_only_teachbacks_own_skills_are_removed(here, db):
    pin(db, here, "A rule that will be deleted.")
    mine = here / ".agents/skills/release-checklist"
    mine.mkdir(parents=True)
    (mine / "SKILL.md").write_text("---\nname: release-checklist\ndescription: Our own.\n---\nSteps.\n")
    assert export(db, "--skills") == 0
    [ours] = [p for p in (here / ".agents/skills").iterdir() if p != mine]
    (ours / "notes.txt").write_text("a file someone added")
    with open_store(db) as store:
        lesson = store.query("SELECT id FROM lessons")[0]["id"]
    assert main(["lessons", "delete", lesson, "--db", str(db)]) == 0
    assert export(db, "--skills") == 0
    assert not (ours / "SKILL.md").exists() and (ours / "notes.txt").exists()  # only what teachback wrote
    assert (mine / "SKILL.md").read_text().endswith("Steps.\n")


def test_a_users_folder_under_teachbacks_name_and_a_file_for_a_folder_are_left_alone(here, db, capsys):
    pin(db, here, "Keep functions short.")
    assert export(db, "--skills") == 0
    [ours] = list((here / ".agents/skills").iterdir())
    own = f"---\nname: {ours.name}\ndescription: Mine now.\n---\nMy words.\n"
    (ours / "SKILL.md").write_text(own)  # the user took the name over
    assert export(db, "--skills") == 0
    assert (ours / "SKILL.md").read_text() == own
    assert f"{ours.name}: a skill that is not teachback's" in capsys.readouterr().out
    (here / "notes").write_text("a file")
    assert export(db, "--skills", "notes") == 2
    assert "is a file, not a folder" in capsys.readouterr().err and (here / "notes").read_text() == "a file"


def test_export_without_a_destination_says_what_to_give(here, db, capsys):
    assert export(db) == 2
    assert "--skills [DIR], --agents-md [FILE]" in capsys.readouterr().err
