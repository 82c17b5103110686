"""Settings: files, environment, precedence, and clear errors for broken config."""

from __future__ import annotations

import pytest

from agent.config import ConfigError, Settings, load_settings, user_config_path


def test_defaults_and_home(teachback_home, tmp_path):
    settings = load_settings(tmp_path, env={"TEACHBACK_HOME": str(teachback_home)})
    assert settings == Settings()
    assert settings.db_path() == teachback_home / "feedback.db"
    assert user_config_path() == teachback_home / "teachback.toml"


def test_precedence_user_then_workspace_then_env(teachback_home, tmp_path):
    (teachback_home / "teachback.toml").write_text('model = "openai/gpt-4o"\nmax_steps = 5\napproval = "auto-edit"\n')
    (tmp_path / "teachback.toml").write_text('[teachback]\nmax-steps = 7\ndeny_commands = ["rm *"]\n')
    env = {"TEACHBACK_HOME": str(teachback_home), "TEACHBACK_APPROVAL": "full-auto", "TEACHBACK_MAX_COST": "0.5"}
    settings = load_settings(tmp_path, env=env)
    assert settings.model == "openai/gpt-4o"
    assert settings.max_steps == 7
    assert settings.approval == "full-auto"
    assert settings.max_cost == 0.5
    assert settings.deny_commands == ("rm *",)
    assert settings.replace(max_steps=3, model=None).max_steps == 3


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("model = ", "not valid TOML"),
        ('approval = "yolo"', "approval must be one of read-only, plan, ask, auto-edit, full-auto"),
        ('max_steps = "many"', "'max_steps' must be int"),
        ("colour = true", "unknown setting(s) colour"),
        ("max_steps = 0", "max_steps must be at least 1"),
    ],
)
def test_broken_config_names_the_file_and_the_fix(tmp_path, content, message):
    (tmp_path / "teachback.toml").write_text(content)
    with pytest.raises(ConfigError) as info:
        load_settings(tmp_path)
    assert message in str(info.value)
    assert str(tmp_path / "teachback.toml") in str(info.value)


def test_bad_environment_values(tmp_path):
    with pytest.raises(ConfigError, match="TEACHBACK_MAX_STEPS must be a number"):
        load_settings(tmp_path, env={"TEACHBACK_MAX_STEPS": "lots"})
    with pytest.raises(ConfigError, match="TEACHBACK_RECORD must be true or false"):
        load_settings(tmp_path, env={"TEACHBACK_RECORD": "maybe"})


def test_sampling_settings_are_optional_and_checked(tmp_path):
    assert Settings().max_tokens is None and Settings().temperature is None
    (tmp_path / "teachback.toml").write_text("max_tokens = 256\ntemperature = 0.2\n")
    settings = load_settings(tmp_path, env={"TEACHBACK_TEMPERATURE": "0.7"})
    assert (settings.max_tokens, settings.temperature) == (256, 0.7)
    with pytest.raises(ConfigError, match="temperature must be between 0 and 2"):
        load_settings(tmp_path, env={"TEACHBACK_TEMPERATURE": "9"})
