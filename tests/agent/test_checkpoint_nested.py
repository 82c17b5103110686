"""Checkpoints and undo in workspaces that hold other repositories, and when a checkpoint fails."""

from __future__ import annotations

import os
import subprocess
import sys

from agent.checkpoint import undo_last
from agent.protocol import EditApplied, ErrorEvent, ToolCallFinished, TurnFinished
from tests.conftest import call, git, turn

EDIT_BOTH = turn(
    call("edit_file", {"path": "app.py", "old_text": "Hello", "new_text": "Hi"}),
    call("edit_file", {"path": "nested/lib.py", "old_text": "one", "new_text": "two"}),
    call("create_file", {"path": "nested/added.py", "content": "added = True\n"}),
)


def teachback_undo(root) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cli", "undo", "--workspace", str(root)],
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ.copy(),
    )


def _nested_repo(root, *, commit: bool):
    nested = root / "nested"
    nested.mkdir()
    git(nested, "init", "-q")
    (nested / "lib.py").write_text("value = 'one'\n")
    (nested / ".gitignore").write_text("*.tmp\n")
    if commit:
        git(nested, "add", "-A")
        git(nested, "-c", "user.name=N", "-c", "user.email=n@example.com", "commit", "-q", "-m", "nested")
    return nested


def _assert_clean_turn(run):
    assert run.of(TurnFinished)[0].reason != "error", run.of(TurnFinished)[0].summary
    assert not [e for e in run.of(ErrorEvent)], [e.message for e in run.of(ErrorEvent)]
    assert all(c.ok for c in run.of(ToolCallFinished))


async def test_a_fresh_nested_repository_is_editable_and_undoable(git_repo, script, run_agent):
    nested = _nested_repo(git_repo, commit=False)  # `git init` with no commit: `git add -A` refuses it
    run = await run_agent(git_repo, script(EDIT_BOTH))
    _assert_clean_turn(run)
    assert len(run.of(EditApplied)) == 3 and (nested / "lib.py").read_text() == "value = 'two'\n"
    done = teachback_undo(git_repo)
    assert done.returncode == 0, done.stderr
    assert "nested/lib.py" in done.stdout and "nested/added.py" in done.stdout and "app.py" in done.stdout
    assert (nested / "lib.py").read_text() == "value = 'one'\n" and not (nested / "added.py").exists()
    assert "Hello" in (git_repo / "app.py").read_text()
    assert git(nested, "status", "--porcelain") == "?? .gitignore\n?? lib.py"


async def test_a_nested_repository_with_commits_is_restored_by_content(git_repo, script, run_agent):
    nested = _nested_repo(git_repo, commit=True)
    head = git(nested, "rev-parse", "HEAD")
    run = await run_agent(git_repo, script(EDIT_BOTH))
    _assert_clean_turn(run)
    assert sorted(undo_last(git_repo)) == ["app.py", "nested/added.py", "nested/lib.py"]
    assert (nested / "lib.py").read_text() == "value = 'one'\n" and not (nested / "added.py").exists()
    assert git(nested, "rev-parse", "HEAD") == head and git(nested, "status", "--porcelain") == ""
    assert git(git_repo, "status", "--porcelain") == "?? nested/"  # the outer index was never touched


async def test_an_ignored_file_inside_a_nested_repository_is_journaled(git_repo, script, run_agent):
    nested = _nested_repo(git_repo, commit=True)
    (nested / "cache.tmp").write_text("before\n")  # the nested repository ignores *.tmp
    run = await run_agent(
        git_repo,
        script(turn(call("edit_file", {"path": "nested/cache.tmp", "old_text": "before", "new_text": "after"}))),
    )
    _assert_clean_turn(run)
    assert undo_last(git_repo) == ["nested/cache.tmp"]
    assert (nested / "cache.tmp").read_text() == "before\n"


async def test_a_submodule_is_editable_and_undoable(git_repo, tmp_path, script, run_agent):
    library = tmp_path / "library"
    library.mkdir()
    git(library, "init", "-q", "-b", "main")
    (library / "lib.py").write_text("value = 'one'\n")
    git(library, "add", "-A")
    git(library, "-c", "user.name=L", "-c", "user.email=l@example.com", "commit", "-q", "-m", "lib")
    git(git_repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(library), "nested")
    git(git_repo, "commit", "-q", "-m", "add submodule")
    run = await run_agent(git_repo, script(EDIT_BOTH))
    _assert_clean_turn(run)
    assert (git_repo / "nested" / "lib.py").read_text() == "value = 'two'\n"
    done = teachback_undo(git_repo)
    assert done.returncode == 0, done.stderr
    assert (git_repo / "nested" / "lib.py").read_text() == "value = 'one'\n"
    assert not (git_repo / "nested" / "added.py").exists()
    assert git(git_repo, "status", "--porcelain") == ""  # the gitlink and the submodule are as they were


async def test_undo_in_a_workspace_below_the_repository_top(git_repo, script, run_agent):
    workspace = git_repo / "pkg"
    workspace.mkdir()
    (workspace / "mod.py").write_text("x = 1\n")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "pkg")
    run = await run_agent(
        workspace,
        script(
            turn(
                call("edit_file", {"path": "mod.py", "old_text": "x = 1", "new_text": "x = 2"}),
                call("create_file", {"path": "new.py", "content": "y = 1\n"}),
            )
        ),
    )
    _assert_clean_turn(run)
    assert sorted(undo_last(workspace)) == ["mod.py", "new.py"]
    assert (workspace / "mod.py").read_text() == "x = 1\n" and not (workspace / "new.py").exists()
    assert not (workspace / "pkg").exists()  # restored where it belongs, not one folder deeper


async def test_undo_restores_modes_and_does_not_follow_a_folder_swapped_for_a_link(
    git_repo, tmp_path, script, run_agent
):
    outside = tmp_path / "outside"
    outside.mkdir()
    (git_repo / "bin").mkdir()
    (git_repo / "bin" / "run.sh").write_text("echo hi\n")
    (git_repo / "bin" / "run.sh").chmod(0o755)
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "bin")
    run = await run_agent(git_repo, script(turn(call("delete_file", {"path": "bin/run.sh"}))))
    _assert_clean_turn(run)
    (git_repo / "bin").rmdir()
    os.symlink(outside, git_repo / "bin")  # what a command could leave behind after the edit
    assert undo_last(git_repo) == ["bin", "bin/run.sh"]
    assert not (git_repo / "bin").is_symlink() and os.listdir(outside) == []
    assert (git_repo / "bin" / "run.sh").stat().st_mode & 0o777 == 0o755


async def test_a_failed_snapshot_never_ends_the_turn_and_undo_uses_the_journal(git_repo, script, run_agent):
    (git_repo / ".git" / "refs" / "teachback").write_text("not a folder\n")  # update-ref cannot write the ref
    run = await run_agent(
        git_repo,
        script(
            turn(
                call("edit_file", {"path": "app.py", "old_text": "Hello", "new_text": "Hi"}),
                call("create_file", {"path": "notes.md", "content": "new\n"}),
            )
        ),
    )
    assert run.of(TurnFinished)[0].reason != "error"
    assert all(c.ok for c in run.of(ToolCallFinished)) and "Hi, " in (git_repo / "app.py").read_text()
    warnings = [e for e in run.of(ErrorEvent) if e.kind == "checkpoint"]
    assert len(warnings) == 1 and "undo journal" in warnings[0].message
    assert sorted(undo_last(git_repo)) == ["app.py", "notes.md"]
    assert "Hello" in (git_repo / "app.py").read_text() and not (git_repo / "notes.md").exists()


async def test_a_corrupt_undo_journal_is_reported_and_the_turn_goes_on(tmp_path, teachback_home, script, run_agent):
    root = tmp_path / "plain"
    root.mkdir()
    (root / "notes.md").write_text("old\n")
    edit = turn(call("edit_file", {"path": "notes.md", "old_text": "old", "new_text": "new"}))
    await run_agent(root, script(edit, name="first.json"))  # outside git: the journal is written
    for journal in (teachback_home / "undo").glob("*.json"):
        journal.write_text("{not json")
    (root / "notes.md").write_text("old\n")
    run = await run_agent(root, script(edit, name="second.json"))
    assert run.of(TurnFinished)[0].reason != "error" and (root / "notes.md").read_text() == "new\n"
    warnings = [e for e in run.of(ErrorEvent) if e.kind == "checkpoint"]
    assert len(warnings) == 1 and "notes.md" in warnings[0].message and "corrupt" in warnings[0].message
