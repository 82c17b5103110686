"""`harbor run` on Docker with the exported sample suite: Harbor's oracle agent scores 1 on every
task and its no-op agent 0, and teachback's Harbor agent, installed from a wheel it uploads, solves a
task with the scripted model and leaves an ATIF v1.7 trajectory Harbor's own model validates.

What it needs (`.ci/harbor-docker` sets it up): a Docker daemon, the base image built locally (base
images cannot be pulled here) and a folder of wheels of teachback's dependencies. Harbor's Docker
environment drives `docker compose`, which Debian's docker.io lacks (Debian 12 packages no Compose
V2 plugin), so the trials run in Harbor's Apple Container environment with its `container` CLI
handed to `docker` (tests/tasks/harbor_docker_cli.py): the same trial, agents and verifier."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cli.entry import main
from feedback_store import open_store
from tasks.sample_suite import sample_suite_path
from tests.store.test_atif_harbor import ROOT, harbor_python, validated
from tests.tasks.test_rollout import SOLVES, WORD_COUNT

IMAGE = "teachback-harbor-base:bookworm"
WHEELS = ROOT / ".harbor" / "wheels"
SETUP = "`.ci/harbor-docker` sets it up"


def docker_ready() -> None:
    """Skip, saying exactly why, where Docker cannot run the trials."""
    if shutil.which("docker") is None:
        pytest.skip(f"no docker command: {SETUP}")
    info = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=60)
    if info.returncode != 0:
        pytest.skip(f"no Docker daemon answers `docker info` ({info.stderr.strip()[-300:]}): {SETUP}")
    if subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True, timeout=60).returncode != 0:
        pytest.skip(f"the base image {IMAGE} is not built: {SETUP}")


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    harbor_python()
    docker_ready()
    out = tmp_path_factory.mktemp("harbor") / "sample"
    assert main(["tasks", "export", str(sample_suite_path()), "--harbor", str(out), "--base-image", IMAGE]) == 0
    return out


def harbor_run(tmp_path: Path, *args: str) -> dict[str, dict]:
    """`harbor run ARGS` in Docker, one trial at a time; each trial's result.json by task name."""
    shim = tmp_path / "bin"
    shim.mkdir(parents=True, exist_ok=True)
    (shim / "container").write_text('#!/bin/sh\nexec docker "$@"\n')
    (shim / "container").chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{shim}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # no network: litellm's bundled price table
    }
    jobs = tmp_path / "jobs"
    command = [str(harbor_python().parent / "harbor"), "run", *args, "--env", "tests.tasks.harbor_docker_cli:DockerCli"]
    done = subprocess.run(
        [*command, "-n", "1", "-o", str(jobs), "-y"], env=env, capture_output=True, text=True, timeout=1500
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    results = {}
    for path in jobs.glob("*/*/result.json"):
        result = json.loads(path.read_text())
        results[result["task_name"]] = {**result, "dir": path.parent}
    return results


def rewards(results: dict[str, dict]) -> dict[str, float | None]:
    return {name: ((r.get("verifier_result") or {}).get("rewards") or {}).get("reward") for name, r in results.items()}


@pytest.mark.timeout(1800)
def test_the_oracle_scores_1_and_the_no_op_agent_0_on_every_sample_task(suite: Path, tmp_path: Path) -> None:
    names = {f"teachback/{p.name}" for p in suite.iterdir()}
    oracle = harbor_run(tmp_path / "oracle", "-p", str(suite), "-a", "oracle")
    assert rewards(oracle) == dict.fromkeys(names, 1.0), [r["exception_info"] for r in oracle.values()]
    for result in oracle.values():  # the monitor's flags lie beside each reward
        assert json.loads((result["dir"] / "verifier" / "flags.json").read_text()) == []
    nop = harbor_run(tmp_path / "nop", "-p", str(suite), "-a", "nop")
    assert rewards(nop) == dict.fromkeys(names, 0.0)


def _wheel(dest: Path) -> Path:
    """teachback's wheel, built from a copy of this tree (a build leaves build/ beside the sources)."""
    source = dest / "source"
    ignore = shutil.ignore_patterns(".git", ".venv*", ".harbor", "build", "*.egg-info", "__pycache__", "node_modules")
    shutil.copytree(ROOT, source, ignore=ignore)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(dest), "."],
        cwd=source,
        check=True,
        capture_output=True,
        timeout=600,
    )
    return next(dest.glob("teachback-*.whl"))


@pytest.mark.timeout(1800)
def test_teachbacks_agent_solves_a_task_with_the_scripted_model_and_leaves_an_atif_trajectory(
    suite: Path, tmp_path: Path
) -> None:
    if not (WHEELS / ".complete").exists():
        pytest.skip(f"no wheels of teachback's dependencies in {WHEELS}: {SETUP}")
    script = tmp_path / "solves.json"
    script.write_text(json.dumps(SOLVES))
    wheel = _wheel(tmp_path / "dist")
    results = harbor_run(
        tmp_path,
        *("-p", str(suite / WORD_COUNT), "--agent-import-path", "teachback_harbor.agent:Teachback"),
        *("-m", f"scripted/{script}", "--ak", f"wheel={wheel}", "--ak", f"find_links={WHEELS}"),
    )
    result = results[f"teachback/{WORD_COUNT}"]
    assert result["exception_info"] is None, result["exception_info"]
    assert rewards(results) == {f"teachback/{WORD_COUNT}": 1.0}
    agent_logs = result["dir"] / "agent"
    [(name, version, agent, steps)] = validated([agent_logs / "trajectory.json"])
    assert (version, agent) == ("ATIF-v1.7", "teachback")
    trajectory = json.loads((agent_logs / "trajectory.json").read_text())
    calls = [c["function_name"] for s in trajectory["steps"] for c in s.get("tool_calls") or []]
    assert calls == ["read_file", "edit_file", "finish"]
    [artifact] = (result["dir"] / "artifacts").rglob("feedback.db")
    for db in (agent_logs / "feedback.db", artifact):
        with open_store(db) as store:
            [session] = store.list_sessions()
            assert session.id == trajectory["session_id"] and session.model.startswith("scripted/")
