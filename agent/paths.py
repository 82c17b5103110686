"""Where teachback keeps user state and finds its user config file, apart from the settings
themselves (agent.config): a hook process needs these paths and nothing that agent.config imports."""

from __future__ import annotations

import os
from pathlib import Path

CONFIG_FILE = "teachback.toml"


def teachback_home() -> Path:
    env = os.environ.get("TEACHBACK_HOME")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "teachback"


def user_config_path() -> Path:
    if os.environ.get("TEACHBACK_HOME"):
        return teachback_home() / CONFIG_FILE
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "teachback" / CONFIG_FILE
