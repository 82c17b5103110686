"""Confinement: every way out of the workspace is refused, for reads and writes alike."""

from __future__ import annotations

import os

import pytest

from agent.config import Settings
from agent.tools import ToolContext
from agent.tools.edits import create_file, delete_file, edit_file, move_file
from agent.tools.files import list_files, read_file, search
from agent.workspace import Workspace, WorkspaceError


@pytest.fixture
def ctx(git_repo):
    return ToolContext(workspace=Workspace(git_repo), settings=Settings())


def test_sibling_prefix_is_outside(git_repo, ctx):
    evil = git_repo.parent / (git_repo.name + "_evil")
    evil.mkdir()
    (evil / "secret.txt").write_text("s3cret")
    result = read_file.fn(ctx, f"../{evil.name}/secret.txt")
    assert result.error_kind == "outside_workspace" and "s3cret" not in result.output
    assert read_file.fn(ctx, str(evil / "secret.txt")).error_kind == "outside_workspace"


@pytest.mark.parametrize("path", ["/etc/passwd", "../outside.txt", "sub/../../outside.txt", "app.py\x00.txt"])
def test_escapes_are_refused_for_every_tool(ctx, path):
    for result in (
        read_file.fn(ctx, path),
        create_file.fn(ctx, path, "x"),
        edit_file.fn(ctx, path, "a", "b"),
        delete_file.fn(ctx, path),
        move_file.fn(ctx, "app.py", path),
        list_files.fn(ctx, path),
        search.fn(ctx, "x", path),
    ):
        assert result.error_kind == "outside_workspace", result.output
        assert not result.changes
        # The feedback says "the workspace" and never names its folder.
        assert str(ctx.workspace.root) not in result.output and ctx.workspace.root.name not in result.output


def test_symlink_out_is_refused(git_repo, ctx, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "data.txt").write_text("private")
    os.symlink(outside, git_repo / "link")
    os.symlink(outside / "data.txt", git_repo / "file_link")
    assert read_file.fn(ctx, "link/data.txt").error_kind == "outside_workspace"
    assert edit_file.fn(ctx, "file_link", "private", "x").error_kind == "outside_workspace"
    assert create_file.fn(ctx, "link/new.txt", "x").error_kind == "outside_workspace"


def test_dot_git_is_never_written(ctx):
    assert create_file.fn(ctx, ".git/hooks/post-commit", "evil").error_kind == "outside_workspace"
    assert edit_file.fn(ctx, ".git/HEAD", "ref", "x").error_kind == "outside_workspace"
    assert ".git" in create_file.fn(ctx, ".git/config2", "x").output


def test_absolute_path_inside_is_allowed(git_repo, ctx):
    result = read_file.fn(ctx, str(git_repo / "app.py"))
    assert result.ok and result.target == "app.py"


def test_overlay_is_read_before_disk(git_repo, ctx):
    ctx.workspace.overlay.set("app.py", "unsaved = True\n", version=3)
    assert "unsaved = True" in read_file.fn(ctx, "app.py").output
    assert "unsaved" in search.fn(ctx, "unsaved").output
    ctx.workspace.overlay.remove("app.py")
    assert "def greet" in read_file.fn(ctx, "app.py").output


def test_workspace_root_must_exist(tmp_path):
    with pytest.raises(WorkspaceError, match="not a directory"):
        Workspace(tmp_path / "missing")


def test_an_outside_path_with_a_twin_inside_gets_a_hint(ctx):
    result = read_file.fn(ctx, "/path/to/project/util.py")
    assert result.error_kind == "outside_workspace"
    assert "Did you mean 'util.py'?" in result.output
    assert "Did you mean" not in read_file.fn(ctx, "/etc/passwd").output
