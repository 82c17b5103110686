"""Project instructions (AGENTS.md, CLAUDE.md) through real sessions of the scripted model on a real
git repository, recorded in a real SQLite file: what the model is given and when, what the store,
every export format and state replay carry, and what `teachback doctor` shows."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agent.config import Settings
from agent.protocol import ContextRef, ErrorEvent, TurnStarted, UserInput
from agent.runtime import open_session
from cli.entry import main
from feedback_store import Recorder, open_store
from feedback_store.export.export import FORMATS
from feedback_store.export.format_table import TRAJECTORIES
from tasks.states import load_states
from tests.conftest import call, git, turn

pytestmark = pytest.mark.timeout(240)

ROOT_RULE = "Root rule: name every test after the behaviour it checks."
SUB_RULE = "Pkg rule: this package keeps four-space indents, overriding the root."
CLAUDE_RULE = "Docs rule from CLAUDE.md."
USER_RULE = "User rule: answer in English."

BAD_EDIT = call("edit_file", {"path": "pkg/mod.py", "old_text": "return 2", "new_text": "return 3"})
GOOD_EDIT = call("edit_file", {"path": "pkg/mod.py", "old_text": "return 1", "new_text": "return 3"})


@pytest.fixture
def project(git_repo: Path) -> Path:
    (git_repo / "AGENTS.md").write_text(f"# Conventions\n{ROOT_RULE}\n")
    (git_repo / "pkg").mkdir()
    (git_repo / "pkg" / "AGENTS.md").write_text(f"{SUB_RULE}\n")
    (git_repo / "pkg" / "mod.py").write_text("def one():\n    return 1\n")
    (git_repo / "docs").mkdir()
    (git_repo / "docs" / "CLAUDE.md").write_text(f"{CLAUDE_RULE}\n")
    (git_repo / "docs" / "guide.md").write_text("# Guide\n")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "instructions")
    return git_repo


async def recorded(root: Path, model: str, db: Path, text: str = "fix pkg", context=(), **more):
    """One recorded session; (session, its events)."""
    store = open_store(db)
    settings = Settings(model=model, approval="full-auto", repo_map_tokens=0, db=str(db), **more)
    session = open_session(root, settings)
    events: list = []
    session.subscribe(Recorder(store))
    session.subscribe(events.append)
    await session.run(UserInput(text=text, context=tuple(context)))
    await session.close()
    store.close()
    return session, events


def fixing_script(script) -> str:
    # read in pkg/ (its AGENTS.md comes with this result), a failed edit there, the fix, a second read
    return script(
        turn(call("read_file", {"path": "pkg/mod.py"})),
        turn(BAD_EDIT),
        turn(GOOD_EDIT),
        turn(call("read_file", {"path": "pkg/mod.py"})),
        turn(call("finish", {"summary": "done"})),
    )


def before_call(messages: list[dict], n: int) -> list[dict]:
    """The messages the model was given at its n-th call (1-based)."""
    replies = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    return messages[: replies[n - 1]]


def text_of(messages: list[dict]) -> str:
    return "\n".join(m.get("content") or "" for m in messages)


async def test_root_then_subfolder_instructions_reach_the_model_closest_last(project, script, tmp_path) -> None:
    session, events = await recorded(project, fixing_script(script), tmp_path / "f.db")
    system = session.messages[0]["content"]
    assert ROOT_RULE in system and SUB_RULE not in system
    assert "closest last" in system and "closer to the file you work on wins" in system
    assert SUB_RULE not in text_of(before_call(session.messages, 1))  # not before a turn reads in pkg/
    second = text_of(before_call(session.messages, 2))
    assert second.index(ROOT_RULE) < second.index(SUB_RULE)  # root first, the closer one last
    first_result = before_call(session.messages, 2)[-1]
    assert (
        first_result["role"] == "tool"
        and '<instructions from="pkg/AGENTS.md" for="files under pkg/">' in (first_result["content"])
    )
    assert "these win" in first_result["content"]
    assert text_of(session.messages).count(SUB_RULE) == 1  # each folder's file is shown once
    assert not [e for e in events if isinstance(e, ErrorEvent)]


async def test_claude_md_where_a_folder_has_no_agents_md_and_from_a_file_the_user_points_at(
    project, script, tmp_path
) -> None:
    (project / "pkg" / "CLAUDE.md").write_text("Never shown: pkg has an AGENTS.md.\n")
    home = Path(os.environ["TEACHBACK_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / "AGENTS.md").write_text(USER_RULE + "\n")
    model = script(turn(call("read_file", {"path": "pkg/mod.py"})), turn(call("finish", {"summary": "ok"})))
    session, events = await recorded(
        project, model, tmp_path / "f.db", text="tidy the guide", context=[ContextRef(path="docs/guide.md")]
    )
    system = session.messages[0]["content"]
    assert system.index(USER_RULE) < system.index(ROOT_RULE)  # the user's own first
    user = next(e for e in events if isinstance(e, TurnStarted)).message["content"]
    assert user.startswith("tidy the guide") and CLAUDE_RULE in user and 'from="docs/CLAUDE.md"' in user
    assert "Never shown" not in text_of(session.messages) and SUB_RULE in text_of(session.messages)


async def test_instructions_are_recorded_and_in_every_export_format(project, script, tmp_path, capsys) -> None:
    db = tmp_path / "f.db"
    session, _ = await recorded(project, fixing_script(script), db)
    store = open_store(db)
    assert store.conversation(session.id) == session.messages  # what the model saw, as recorded
    store.close()
    for fmt in [*FORMATS, TRAJECTORIES.kind]:
        out = tmp_path / "out" / f"{fmt}{FORMATS[fmt].suffix if fmt in FORMATS else '.jsonl'}"
        assert main(["export", "--db", str(db), "--format", fmt, "--out", str(out)]) == 0, capsys.readouterr().err
        if out.suffix == ".parquet":
            import pyarrow.parquet as pq

            exported = json.dumps(pq.read_table(out).to_pylist(), default=str)
        else:
            exported = out.read_text(encoding="utf-8")
        assert ROOT_RULE in exported and SUB_RULE in exported, fmt


async def test_a_replayed_state_gets_the_instructions_the_model_had(project, script, tmp_path) -> None:
    db = tmp_path / "f.db"
    session, _ = await recorded(project, fixing_script(script), db)
    store = open_store(db)
    store.mark_task(session.id, {"instance_id": "pkg-task", "attempt": 0, "reward": 1.0})
    store.close()
    states = load_states(db)
    assert [s.step for s in states] == [1, 2, 3, 4, 5]
    for state in states:
        assert state.messages == before_call(session.messages, state.step)
    assert ROOT_RULE in states[0].messages[0]["content"] and SUB_RULE in text_of(states[1].messages)


async def test_instructions_bytes_zero_reads_none(project, script, tmp_path) -> None:
    session, _ = await recorded(project, fixing_script(script), tmp_path / "f.db", instructions_bytes=0)
    assert ROOT_RULE not in text_of(session.messages) and SUB_RULE not in text_of(session.messages)


async def test_a_resumed_session_does_not_show_the_same_files_again(project, script, tmp_path) -> None:
    first, _ = await recorded(project, fixing_script(script), tmp_path / "f.db")
    # The scripted model answers by the number of replies so far: the first session made five.
    unused = [turn(content="(the first session's reply)")] * 5
    model = script(
        *unused, turn(call("list_files", {"path": "pkg"})), turn(call("read_file", {"path": "docs/guide.md"}))
    )
    settings = Settings(model=model, approval="full-auto", repo_map_tokens=0, record=False)
    again = open_session(project, settings, session_id=first.id, history=first.messages)
    await again.run(UserInput(text="go on"))
    added = text_of(again.messages[len(first.messages) :])
    assert SUB_RULE not in added and ROOT_RULE not in added  # already in the conversation
    assert CLAUDE_RULE in added  # a folder the first turn did not work in
