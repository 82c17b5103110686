"""Hostile and careless settings: every one is a clear error naming where it came from, never a
traceback, never a silently disabled limit."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.config import ConfigError, Settings, load_settings

TEACHBACK = [sys.executable, "-m", "cli"]
NUMERIC = [f.name for f in dataclasses.fields(Settings) if str(f.type).removesuffix(" | None") in ("int", "float")]


def teachback(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*TEACHBACK, *args], capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})}
    )


def config_error(workspace: Path, content: str) -> str:
    (workspace / "teachback.toml").write_text(content)
    with pytest.raises(ConfigError) as info:
        load_settings(workspace)
    return str(info.value)


@pytest.mark.parametrize(
    ("content", "key", "reason"),
    [
        ("max_steps = inf", "max_steps", "whole number"),
        ("max_steps = -inf", "max_steps", "whole number"),
        ("max_steps = nan", "max_steps", "whole number"),
        ("teachback = 5", "teachback", "must be a table"),
        ('teachback = "model"', "teachback", "must be a table"),
        ("max_cost = nan", "max_cost", "finite"),
        ("max_cost = inf", "max_cost", "finite"),
        ("max_cost = -1", "max_cost", "at least 0"),
        ("max_time = nan", "max_time", "finite"),
        ("max_time = 0", "max_time", "above 0"),
        ("max_time = -5.5", "max_time", "above 0"),
        ("command_timeout = nan", "command_timeout", "finite"),
        ("repo_map_tokens = -1", "repo_map_tokens", "at least 0"),
        ("max_tokens = 0", "max_tokens", "at least 1"),
        ("temperature = nan", "temperature", "finite"),
        ("db_wait = -1", "db_wait", "at least 0"),
        ("max_steps = true", "max_steps", "whole number"),
        ("max_cost = false", "max_cost", "float"),
        ("max_steps = 9e999", "max_steps", "whole number"),
        ("[teachback]\nmax_cost = [1]", "max_cost", "float"),
        ("[teachback]\nmodel = {name = 'x'}", "model", "str"),
    ],
)
def test_a_bad_value_names_the_file_and_the_key(tmp_path, content, key, reason):
    message = config_error(tmp_path, content)
    assert str(tmp_path / "teachback.toml") in message
    assert key in message and reason in message


@pytest.mark.parametrize("name", NUMERIC)
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1"])
def test_every_number_setting_is_finite_and_not_negative(tmp_path, name, value):
    message = config_error(tmp_path, f"{name} = {value}")
    assert name in message and str(tmp_path / "teachback.toml") in message


@pytest.mark.parametrize("name", NUMERIC)
def test_every_number_setting_from_the_environment_is_checked(tmp_path, name):
    variable = f"TEACHBACK_{name.upper()}"
    with pytest.raises(ConfigError) as info:
        load_settings(tmp_path, env={variable: "nan"})
    assert variable in str(info.value)


@pytest.mark.parametrize("name", NUMERIC)
def test_every_number_setting_from_arguments_is_checked(name):
    with pytest.raises(ConfigError, match=name):
        Settings().replace(**{name: float("nan")})


def test_good_values_still_load(tmp_path):
    (tmp_path / "teachback.toml").write_text("max_cost = 0\nmax_time = 0.5\nmax_steps = 3.0\ndb_wait = 0\n")
    settings = load_settings(tmp_path)
    assert (settings.max_cost, settings.max_time, settings.max_steps, settings.db_wait) == (0, 0.5, 3, 0)


@pytest.mark.parametrize(
    ("content", "key"),
    [
        ("max_steps = inf", "max_steps"),
        ("teachback = 5", "teachback"),
        ("max_cost = nan", "max_cost"),
        ("max_time = nan", "max_time"),
    ],
)
def test_run_with_a_bad_config_exits_2_without_a_traceback(git_repo, content, key):
    (git_repo / "teachback.toml").write_text(content + "\n")
    done = teachback("run", "--no-record", "--workspace", str(git_repo), "hello")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "configuration error" in done.stderr and key in done.stderr
    assert str(git_repo / "teachback.toml") in done.stderr


@pytest.mark.parametrize("flag", [["--max-cost", "nan"], ["--max-cost", "-1"], ["--max-steps", "0"]])
def test_run_with_a_bad_flag_exits_2(git_repo, flag):
    done = teachback("run", "--no-record", "--workspace", str(git_repo), *flag, "hello")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert flag[0].removeprefix("--").replace("-", "_") in done.stderr


def test_db_at_a_folder_exits_2_and_says_so(git_repo, tmp_path):
    done = teachback("run", "--workspace", str(git_repo), "--db", str(tmp_path), "hello")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "is a folder" in done.stderr and str(tmp_path) in done.stderr


def test_db_below_a_file_exits_2_and_says_so(git_repo, tmp_path):
    blocker = tmp_path / "plain-file"
    blocker.write_text("not a folder")
    done = teachback("run", "--workspace", str(git_repo), "--db", str(blocker / "f.db"), "hello")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert str(blocker / "f.db") in done.stderr and "--db" in done.stderr


def test_db_in_an_unwritable_folder_exits_2_and_says_so(git_repo, tmp_path):
    folder = tmp_path / "locked-away"
    folder.mkdir()
    with _unwritable(folder):
        done = teachback("run", "--workspace", str(git_repo), "--db", str(folder / "f.db"), "hello")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert str(folder / "f.db") in done.stderr and "--db" in done.stderr
    assert not (git_repo / "hello").exists()


class _unwritable:
    """A folder nobody may write: chmod for a user; the immutable flag for root (or skip)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def __enter__(self) -> None:
        if os.geteuid() != 0:
            self.folder.chmod(0o500)
            return
        made = subprocess.run(["chattr", "+i", str(self.folder)], capture_output=True, text=True)
        if made.returncode != 0:
            pytest.skip(f"running as root and chattr +i is unavailable here: {made.stderr.strip()}")

    def __exit__(self, *exc: object) -> None:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(self.folder)], check=True)
        else:
            self.folder.chmod(0o700)
