"""`teachback tasks export --harbor`: the sample suite as Harbor task folders, loaded and validated by
Harbor's own Task model (in the venv `make harbor` builds), and each task's verifier run directly
with bash: the gold solution scores 1, the sealed workspace 0, a flagged trial 0."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cli.entry import main
from tasks.records import load_tasks
from tasks.sample_suite import sample_suite_path
from tests.store.test_atif_harbor import ROOT, harbor_python

TASKS = load_tasks(sample_suite_path())
# Loads each folder named on the command line with Harbor's Task (which parses task.toml with
# TaskConfig and checks instruction.md, tests/test.sh and the solution), and says what it read.
LOAD = """
import json, sys
from harbor.models.task.task import Task
for name in sys.argv[1:]:
    task = Task(name)
    assert Task.is_valid_dir(name), name
    print(json.dumps({
        "folder": task.paths.task_dir.name, "name": task.name, "instruction": task.instruction,
        "test": str(task.paths.discovered_test_path_for(task.config.environment.os)),
        "solve": str(task.paths.discovered_solve_path), "dockerfile": task.paths.environment_dir.joinpath("Dockerfile").is_file(),
        "metadata": task.config.metadata, "workdir": task.config.environment.workdir,
    }))
"""


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("harbor") / "tasks"
    assert main(["tasks", "export", str(sample_suite_path()), "--harbor", str(out)]) == 0
    return out


def test_harbor_loads_and_validates_every_exported_sample_task(exported: Path) -> None:
    assert sorted(p.name for p in exported.iterdir()) == sorted(t.instance_id for t in TASKS)
    assert all(p.is_dir() for p in exported.iterdir())
    done = subprocess.run(
        [str(harbor_python()), "-c", LOAD, *sorted(map(str, exported.iterdir()))],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = {row["folder"]: row for row in map(json.loads, done.stdout.splitlines())}
    assert len(loaded) == len(TASKS)
    for task in TASKS:
        row = loaded[task.instance_id]
        assert row["name"] == f"teachback/{task.instance_id}"
        assert row["instruction"] == task.problem_statement
        assert row["test"].endswith("tests/test.sh") and row["solve"].endswith("solution/solve.sh")
        assert row["dockerfile"] and row["workdir"] == "/app"
        assert row["metadata"]["FAIL_TO_PASS"] == list(task.FAIL_TO_PASS)
        assert row["metadata"]["PASS_TO_PASS"] == list(task.PASS_TO_PASS)


def test_the_environment_is_the_sealed_workspace_with_one_commit(exported: Path) -> None:
    task = TASKS[0]
    workspace = exported / task.instance_id / "environment" / "workspace"
    deleted = (workspace / task.deleted[0].path).read_text(encoding="utf-8")
    assert "raise NotImplementedError" in deleted
    log = subprocess.run(["git", "-C", str(workspace), "log", "--format=%s"], capture_output=True, text=True)
    assert log.stdout.splitlines() == ["Task workspace"]
    assert "COPY workspace/ /app/" in (workspace.parent / "Dockerfile").read_text(encoding="utf-8")


def _verify(folder: Path, workspace: Path, logs: Path) -> tuple[str, list[dict]]:
    env = {
        **os.environ,
        "TEACHBACK_WORKSPACE": str(workspace),
        "TEACHBACK_VERIFIER_LOGS": str(logs),
        "TEACHBACK_PYTHON": sys.executable,
    }
    done = subprocess.run(
        ["bash", str(folder / "tests" / "test.sh")], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return (logs / "reward.txt").read_text().strip(), json.loads((logs / "flags.json").read_text())


def _solved(folder: Path, dest: Path) -> Path:
    shutil.copytree(folder / "environment" / "workspace", dest)
    env = {**os.environ, "TEACHBACK_WORKSPACE": str(dest)}
    subprocess.run(["bash", str(folder / "solution" / "solve.sh")], env=env, check=True, capture_output=True)
    return dest


@pytest.mark.parametrize("task", TASKS[:3], ids=lambda t: t.instance_id.rsplit(".", 1)[-1])
def test_the_verifier_gives_the_gold_solution_1_and_the_sealed_workspace_0(
    exported: Path, tmp_path: Path, task
) -> None:
    folder = exported / task.instance_id
    sealed = shutil.copytree(folder / "environment" / "workspace", tmp_path / "sealed")
    assert _verify(folder, sealed, tmp_path / "logs-sealed") == ("0", [])
    assert _verify(folder, _solved(folder, tmp_path / "gold"), tmp_path / "logs-gold") == ("1", [])
    grade = json.loads((tmp_path / "logs-gold" / "grade.json").read_text())
    assert set(grade["outcomes"].values()) == {"passed"} and grade["flagged"] is False


def test_a_flagged_trial_scores_0_though_its_tests_pass(exported: Path, tmp_path: Path) -> None:
    folder = exported / TASKS[0].instance_id
    workspace = _solved(folder, tmp_path / "gold")
    test = workspace / "tests" / "test_words.py"
    test.write_text("import pytest\n\n" + test.read_text().replace("def test_", "@pytest.mark.skip\ndef test_", 1))
    (workspace / "tests" / "test_wrap.py").unlink()
    reward, flags = _verify(folder, workspace, tmp_path / "logs")
    assert reward == "0"
    assert {(f["rule"], f["path"]) for f in flags} == {
        ("skips_test", "tests/test_words.py"),
        ("deletes_test", "tests/test_wrap.py"),
    }
    # grading ran the pristine tests, which pass: the flags alone make it 0
    grade = json.loads((tmp_path / "logs" / "grade.json").read_text())
    assert set(grade["outcomes"].values()) == {"passed"} and grade["flagged"] is True


def test_export_refuses_a_folder_that_holds_something(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    assert main(["tasks", "export", str(sample_suite_path()), "--harbor", str(tmp_path)]) == 2
    assert "not an empty folder" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_export_names_a_task_file_it_cannot_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "list.jsonl").write_text("[1]\n")
    assert main(["tasks", "export", str(tmp_path / "missing.jsonl"), "--harbor", str(tmp_path / "a")]) == 2
    assert "missing.jsonl is not a file" in capsys.readouterr().err
    assert main(["tasks", "export", str(tmp_path / "list.jsonl"), "--harbor", str(tmp_path / "b")]) == 2
    assert "must be a JSON object" in capsys.readouterr().err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_the_verifier_carries_teachbacks_own_runner_and_monitor(exported: Path) -> None:
    lib = exported / TASKS[0].instance_id / "tests" / "lib"
    for copy, source in (
        ("tasks/testrun.py", "tasks/testrun.py"),
        ("feedback_store/recording/monitor.py", "feedback_store/recording/monitor.py"),
    ):
        assert (lib / copy).read_bytes() == (ROOT / source).read_bytes()
    assert not list(lib.rglob("__init__.py"))  # namespace packages: nothing of teachback runs on import


AGENT = """
import json, sys, tempfile
from pathlib import Path
from harbor.agents.factory import AgentFactory
from harbor.agents.installed.base import BaseInstalledAgent
logs = Path(tempfile.mkdtemp())
agent = AgentFactory.create_agent_from_import_path(
    "teachback_harbor.agent:Teachback", logs_dir=logs, model_name="scripted/s.json", wheel=sys.argv[1], max_steps=5
)
print(json.dumps([isinstance(agent, BaseInstalledAgent), agent.name(), agent.options.wheel, agent.options.max_steps]))
try:
    AgentFactory.create_agent_from_import_path("teachback_harbor.agent:Teachback", logs_dir=logs, max_steps=5)
except ValueError as exc:
    print(json.dumps(str(exc)))
"""


def test_harbor_loads_teachbacks_agent_by_import_path(tmp_path: Path) -> None:
    wheel = tmp_path / "teachback-0.1.0-py3-none-any.whl"
    done = subprocess.run(
        [str(harbor_python()), "-c", AGENT, str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    loaded, refused = map(json.loads, done.stdout.splitlines())
    assert loaded == [True, "teachback", str(wheel), 5]
    assert "wheel" in refused  # the one option it cannot run without
