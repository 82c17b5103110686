"""The workspace boundary under attack: planted links, links out, hard links, git folders at any
depth, and what a sandboxed command can reach. Each attack is set up on disk as an attacker (or a
cloned repository) would leave it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from agent.config import ConfigError, Settings, load_settings
from agent.protocol import SessionStarted, ToolCallFinished, TurnFinished
from agent.repomap import RepoMap
from agent.safe_write import SafeWriteError, write_inside
from agent.sandbox import sandbox_exec_argv
from agent.tools import ToolContext
from agent.tools.commands import run_command
from agent.tools.edits import create_file, delete_file, edit_file, move_file
from agent.tools.files import list_files, read_file, search
from agent.workspace import Workspace
from tests.conftest import call, git, turn


@pytest.fixture
def outside(tmp_path):
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "victim.txt").write_text("original outside content\n")
    (folder / "secret.py").write_text("def leaked_secret_function():\n    return 'OUTSIDE_SECRET'\n")
    return folder


@pytest.fixture
def ctx(git_repo):
    return ToolContext(workspace=Workspace(git_repo), settings=Settings())


def finished_calls(run) -> list[ToolCallFinished]:
    return run.of(ToolCallFinished)


# -- atomic writes ------------------------------------------------------------------------------


async def test_a_planted_temp_name_link_cannot_redirect_edits(git_repo, outside, script, run_agent):
    victim = outside / "victim.txt"
    for name in ("app.py", "new.py"):  # the temporary names the old writer used, for an edit and a create
        os.symlink(victim, git_repo / f".{name}.teachback-tmp")
    model = script(
        turn(
            call("edit_file", {"path": "app.py", "old_text": "Hello", "new_text": "Hi"}),
            call("create_file", {"path": "new.py", "content": "x = 1\n"}),
        )
    )
    run = await run_agent(git_repo, model)
    assert victim.read_text() == "original outside content\n"
    assert [c.ok for c in finished_calls(run)] == [True, True]
    assert "Hi, " in (git_repo / "app.py").read_text() and (git_repo / "new.py").read_text() == "x = 1\n"
    assert not (git_repo / "app.py").is_symlink() and os.path.islink(git_repo / ".app.py.teachback-tmp")
    assert not [p for p in os.listdir(git_repo) if p.startswith(".teachback-")]  # no temporary file left


async def test_a_target_link_that_leads_out_is_refused(git_repo, outside, script, run_agent):
    os.symlink(outside / "victim.txt", git_repo / "notes.txt")
    os.symlink(outside / "absent.txt", git_repo / "fresh.txt")  # dangling, to a file that does not exist yet
    model = script(
        turn(
            call("edit_file", {"path": "notes.txt", "old_text": "original", "new_text": "owned"}),
            call("create_file", {"path": "fresh.txt", "content": "owned\n"}),
        )
    )
    run = await run_agent(git_repo, model)
    assert [c.error_kind for c in finished_calls(run)] == ["outside_workspace", "outside_workspace"]
    assert (outside / "victim.txt").read_text() == "original outside content\n"
    assert not (outside / "absent.txt").exists()


def test_a_folder_swapped_for_a_link_after_the_check_is_not_followed(git_repo, outside):
    (git_repo / "pkg").mkdir()
    (git_repo / "pkg" / "victim.txt").write_text("inside\n")
    checked = Workspace(git_repo).resolve_writable("pkg/victim.txt")  # the check passes ...
    (git_repo / "pkg" / "victim.txt").unlink()
    (git_repo / "pkg").rmdir()
    os.symlink(outside, git_repo / "pkg")  # ... then the folder becomes a link out before the write
    with pytest.raises(SafeWriteError, match="link"):
        write_inside(git_repo, Workspace(git_repo).relative(checked), b"owned\n")
    assert (outside / "victim.txt").read_text() == "original outside content\n"
    assert not [p for p in os.listdir(outside) if p.startswith(".teachback-")]


def test_a_write_keeps_the_mode_and_replaces_a_link_at_the_target_itself(git_repo, outside):
    script_file = git_repo / "run.sh"
    script_file.write_text("echo hi\n")
    script_file.chmod(0o750)
    write_inside(git_repo, "run.sh", b"echo bye\n")
    assert script_file.read_text() == "echo bye\n" and script_file.stat().st_mode & 0o777 == 0o750
    os.symlink(outside / "victim.txt", git_repo / "swapped.txt")  # appeared after the check
    write_inside(git_repo, "swapped.txt", b"inside\n")
    assert not (git_repo / "swapped.txt").is_symlink()
    assert (outside / "victim.txt").read_text() == "original outside content\n"


# -- hard links ---------------------------------------------------------------------------------


async def test_a_file_hard_linked_from_outside_is_read_only(git_repo, outside, script, run_agent):
    os.link(outside / "victim.txt", git_repo / "shared.txt")
    model = script(
        turn(
            call("read_file", {"path": "shared.txt"}),
            call("edit_file", {"path": "shared.txt", "old_text": "original", "new_text": "owned"}),
            call("delete_file", {"path": "shared.txt"}),
            call("move_file", {"src": "shared.txt", "dst": "moved.txt"}),
        )
    )
    run = await run_agent(git_repo, model)
    read, edit, delete, move = finished_calls(run)
    assert read.ok and "original outside content" in read.result
    for refused in (edit, delete, move):
        assert refused.error_kind == "outside_workspace" and "hard links" in refused.result
    assert "cp -p shared.txt" in edit.result  # says how to detach a private copy
    assert (outside / "victim.txt").read_text() == "original outside content\n"
    assert (git_repo / "shared.txt").exists()


# -- git folders at any depth -------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "nested/.git/hooks/pre-commit",
        "nested/.git/config",
        "sub/.GIT/hooks/post-checkout",
        ".Git/config",
        "deep/a/b/.git/info/attributes",
        "x/.git./hooks/x",
        "x/git~1/config",
        "y/.g\u200cit/hooks/pre-push",
        ".git::$INDEX_ALLOCATION/config",
        "x/.git::$INDEX_ALLOCATION/hooks/pre-commit",
        "x/.GIT:$I30:$INDEX_ALLOCATION/hooks/pre-commit",
        "x/.git:stream",
        "x/git~1:$DATA/config",
        "x/.git . ./hooks/x",
        "x/.git. ::$INDEX_ALLOCATION/config",
        "x/a\\.git\\hooks\\pre-commit",
    ],
)
def test_no_git_folder_at_any_depth_is_writable(git_repo, ctx, path):
    nested = git_repo / "nested"
    nested.mkdir()
    git(nested, "init", "-q")
    result = create_file.fn(ctx, path, "#!/bin/sh\necho owned\n")
    assert result.error_kind == "outside_workspace" and "git folder" in result.output
    assert not result.changes


def test_git_folders_are_refused_as_move_and_delete_sources_and_targets(git_repo, ctx):
    nested = git_repo / "nested"
    nested.mkdir()
    git(nested, "init", "-q")
    assert move_file.fn(ctx, "app.py", "nested/.git/hooks/pre-commit").error_kind == "outside_workspace"
    assert move_file.fn(ctx, "nested/.git/HEAD", "head.txt").error_kind == "outside_workspace"
    assert delete_file.fn(ctx, "nested/.git/HEAD").error_kind == "outside_workspace"
    assert edit_file.fn(ctx, "nested/.git/HEAD", "ref", "x").error_kind == "outside_workspace"
    os.symlink(nested / ".git" / "hooks", git_repo / "hooks")  # a link inside that leads into a git folder
    assert create_file.fn(ctx, "hooks/pre-commit", "x").error_kind == "outside_workspace"
    assert not (nested / ".git" / "hooks" / "pre-commit").exists()
    assert create_file.fn(ctx, "nested/.github/workflows/ci.yml", "on: push\n").ok  # a look-alike is fine


# -- links out in search, list_files and the repo map -------------------------------------------


def _plant_links_out(root, outside):
    os.symlink(outside / "secret.py", root / "leak.py")
    os.symlink(outside, root / "linked_dir")
    os.symlink(root / "util.py", root / "util_alias.py")  # a link that stays inside is fine


@pytest.mark.parametrize("tracked", [False, True])
def test_search_and_list_files_skip_links_out(git_repo, ctx, outside, tracked):
    _plant_links_out(git_repo, outside)
    if tracked:  # committed links, as a cloned repository would bring them
        git(git_repo, "add", "-A")
        git(git_repo, "commit", "-q", "-m", "links")
    listed = list_files.fn(ctx).output
    assert "leak.py" not in listed and "linked_dir" not in listed and "util_alias.py" in listed
    assert "No matches" in search.fn(ctx, "OUTSIDE_SECRET").output
    assert "No matches" in search.fn(ctx, "leaked_secret", glob="*.py").output
    assert "util_alias.py" in search.fn(ctx, "def sub").output
    assert read_file.fn(ctx, "leak.py").error_kind == "outside_workspace"


def test_a_tracked_file_whose_folder_became_a_link_out_is_skipped(git_repo, ctx, outside):
    (git_repo / "pkg").mkdir()
    (git_repo / "pkg" / "secret.py").write_text("inside = True\n")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "pkg")
    (git_repo / "pkg" / "secret.py").unlink()
    (git_repo / "pkg").rmdir()
    os.symlink(outside, git_repo / "pkg")  # git's index still lists pkg/secret.py
    assert "pkg/secret.py" not in list_files.fn(ctx).output
    assert "No matches" in search.fn(ctx, "OUTSIDE_SECRET").output


def test_links_out_are_skipped_outside_git_too(tmp_path, outside):
    root = tmp_path / "plain"
    root.mkdir()
    (root / "util.py").write_text("def sub(a, b):\n    return a - b\n")
    _plant_links_out(root, outside)
    ctx = ToolContext(workspace=Workspace(root), settings=Settings())
    assert "leak.py" not in list_files.fn(ctx).output
    assert "No matches" in search.fn(ctx, "OUTSIDE_SECRET").output


async def test_the_repo_map_never_shows_code_from_outside(git_repo, outside, script, run_agent):
    _plant_links_out(git_repo, outside)
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "links")
    repo_map = RepoMap(git_repo)
    try:
        rendered = repo_map.render(tokens=4096, mentioned=["leaked_secret_function"])
        repo_map.update("leak.py")  # an editor naming the link does not bring it in either
        again = repo_map.render(tokens=4096, mentioned=["leaked_secret_function"])
    finally:
        repo_map.close()
    assert "def sub" in rendered and "leaked_secret_function" not in rendered + again
    run = await run_agent(git_repo, script(), instruction="call leaked_secret_function from util.py")
    prompt = run.of(SessionStarted)[0].system_prompt
    assert "def sub" in prompt and "leaked_secret_function()" not in prompt
    done = subprocess.run(
        [sys.executable, "-m", "cli", "map", "--workspace", str(git_repo), "--focus", "leaked_secret_function"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "def sub" in done.stdout and "OUTSIDE" not in done.stdout
    assert "leaked_secret_function" not in done.stdout


async def test_a_turn_with_a_refused_write_still_finishes_normally(git_repo, outside, script, run_agent):
    os.link(outside / "victim.txt", git_repo / "shared.txt")
    run = await run_agent(
        git_repo, script(turn(call("create_file", {"path": "x/.git/hooks/pre-commit", "content": "evil"})))
    )
    assert run.of(TurnFinished)[0].reason != "error"


# -- run_command's sandbox ----------------------------------------------------------------------


@pytest.fixture
def bwrap():
    exe = shutil.which("bwrap")
    if exe is None:
        pytest.skip("bubblewrap is not installed (apt install bubblewrap)")
    probe = subprocess.run(
        [exe, "--ro-bind", "/", "/", "--unshare-net", "--unshare-pid", "--", "true"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if probe.returncode != 0:
        pytest.skip(f"bubblewrap cannot create namespaces here (user namespaces off?): {probe.stderr.strip()}")
    return exe


async def test_a_sandboxed_command_writes_only_in_the_workspace(git_repo, tmp_path, monkeypatch, bwrap):
    home = tmp_path / "home"
    home.mkdir()
    (home / "secret.txt").write_text("HOME_SECRET\n")
    monkeypatch.setenv("HOME", str(home))
    ctx = ToolContext(workspace=Workspace(git_repo), settings=Settings(sandbox="bwrap"))
    probe = f"/var/tmp/teachback-probe-{os.getpid()}"

    made = await run_command.fn(ctx, "echo made > inside.txt && echo $TEACHBACK_SANDBOX")
    assert made.ok and "bwrap" in made.output and "sandboxed" in made.output
    assert (git_repo / "inside.txt").read_text() == "made\n"
    elsewhere = await run_command.fn(ctx, f"touch {probe}")
    assert elsewhere.error_kind == "exit_status" and "Read-only" in elsewhere.output and not os.path.exists(probe)
    hook = await run_command.fn(ctx, "echo evil > .git/hooks/pre-commit")
    assert not hook.ok and not (git_repo / ".git" / "hooks" / "pre-commit").exists()
    secret = await run_command.fn(ctx, f"cat {home}/secret.txt")
    assert not secret.ok and "HOME_SECRET" not in secret.output
    network = await run_command.fn(ctx, "cat /proc/net/dev")
    table = network.output.split("\n", 2)[2]  # after the "$ command" and "[exit code ...]" lines
    interfaces = [line.split(":")[0].strip() for line in table.splitlines() if ":" in line]
    assert network.ok and interfaces == ["lo"]
    unconfined = await run_command.fn(ToolContext(workspace=ctx.workspace, settings=Settings()), "cat /proc/net/dev")
    assert "sandboxed" not in unconfined.output


async def test_a_missing_sandbox_is_a_clear_tool_error(git_repo, tmp_path, monkeypatch, script, run_agent):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    os.symlink(shutil.which("git"), bin_dir / "git")
    monkeypatch.setenv("PATH", str(bin_dir))  # git, but no bubblewrap
    run = await run_agent(git_repo, script(turn(call("run_command", {"command": "touch made.txt"}))), sandbox="bwrap")
    result = finished_calls(run)[0]
    assert result.error_kind == "failed" and "apt install bubblewrap" in result.result
    assert 'sandbox = "none"' in result.result and not (git_repo / "made.txt").exists()
    assert run.of(TurnFinished)[0].reason != "error"
    ctx = ToolContext(workspace=Workspace(git_repo), settings=Settings(sandbox="sandbox-exec"))
    if sys.platform != "darwin":
        assert "ships with macOS" in (await run_command.fn(ctx, "true")).output


def test_the_sandbox_setting_is_checked_and_the_macos_profile_confines(git_repo):
    with pytest.raises(ConfigError, match="sandbox must be one of none, auto, bwrap, sandbox-exec"):
        Settings().replace(sandbox="firejail")
    (git_repo / "teachback.toml").write_text('sandbox = "auto"\n')
    assert load_settings(git_repo, env={}).sandbox == "auto"
    argv = sandbox_exec_argv("/usr/bin/sandbox-exec", git_repo, "make test", git_repo.parent)
    assert argv[-3:] == ["/bin/sh", "-c", "make test"] and f"WORKSPACE={git_repo}" in argv
    profile = argv[argv.index("-p") + 1]
    assert "(deny network-outbound (remote ip))" in profile and "(deny file-write*)" in profile
    assert profile.index("(deny file-write*)") < profile.index('(subpath (param "WORKSPACE"))')
