"""The checks a frontend makes at start-up (git, the model and its credentials), each answered with
its fix; `teachback doctor` (cli/doctor.py) makes them too, with the rest of its checks."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from agent.config import Settings

Check = tuple[str, bool, str]  # name, ok, detail (how to fix when not ok)


def startup_problems(workspace: Path, settings: Settings) -> list[str]:
    """What the checks a frontend can make at start-up (git, the model and its credentials) find
    wrong, each with its fix. A litellm model's check imports litellm (seconds): call it off the UI's
    thread."""
    checks = (check_git(workspace), check_model(settings))
    return [f"{name}: {detail}" for name, ok, detail in checks if not ok]


def check_git(workspace: Path) -> Check:
    if shutil.which("git") is None:
        return ("git", False, "no `git` on PATH: install git (checkpoints, undo and file listing need it).")
    version = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip()
    inside = (
        subprocess.run(
            ["git", "rev-parse", "--is-inside-work-tree"], cwd=workspace, capture_output=True, text=True
        ).stdout.strip()
        == "true"
    )
    where = "workspace is a git repository" if inside else "workspace is not a git repository (undo uses a journal)"
    return ("git", True, f"{version}; {where}")


def check_model(settings: Settings) -> Check:
    model = settings.model
    provider = model.split("/", 1)[0]
    checks: dict[str, Callable[[str], Check]] = {"scripted": _check_scripted, "local": _check_local}
    if provider in checks:
        return checks[provider](model)
    from agent.llm import load_litellm

    litellm = load_litellm()
    try:
        report = litellm.validate_environment(model=model)
    except Exception as exc:  # litellm raises plain Exceptions for model strings it cannot map
        return ("model", False, f"{model}: {exc}. Use a litellm model string such as openai/gpt-4o.")
    missing = report.get("missing_keys") or []
    if missing:
        return ("model", False, f"{model}: set {', '.join(missing)} in the environment.")
    return ("model", True, f"{model}: credentials present (not called)")


def _check_scripted(model: str) -> Check:
    from agent.providers.scripted import ScriptError, load_script

    try:
        turns = load_script(model.split("/", 1)[1])
    except ScriptError as exc:
        return ("model", False, str(exc))
    return ("model", True, f"{model}: {len(turns)} scripted turns")


def _check_local(model: str) -> Check:
    from agent.providers.llama_engine import LocalModelError, check_runtime

    try:
        gguf = check_runtime(model.removeprefix("local/"))
    except LocalModelError as exc:
        return ("model", False, f"{model}: {exc}")
    return ("model", True, f"{model}: {gguf.name} ({os.path.getsize(gguf) // 1_000_000} MB)")
