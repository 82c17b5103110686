"""teachback as a Harbor installed agent (harbor.agents.installed.base.BaseInstalledAgent).

    harbor run -p TASKS --agent-import-path teachback_harbor.agent:Teachback -m MODEL \\
        --ak wheel=dist/teachback-0.1.0-py3-none-any.whl [--ak find_links=wheelhouse/]

It uploads the teachback wheel it is given (and, for an image without a network, a folder of
wheels of its dependencies), installs it into a venv of its own in the environment, runs
`teachback run` headless on the instruction with the model it is given, and leaves in the agent
logs folder the session's ATIF trajectory (`trajectory.json`, as Harbor's own agents do), the
transcript (`teachback.txt`) and the feedback database (`feedback.db`, also copied to the trial's
artifacts). A model `scripted/<file on this machine>` (teachback's scripted model) has its script
uploaded as well.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import override

from harbor.agents.installed.base import BaseInstalledAgent, with_prompt_template
from harbor.agents.options import InstalledAgentOptions
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext
from pydantic import Field

INSTALL_DIR = "/installed-agent/teachback"
VENV = "/opt/teachback-venv"
# Under the agent logs folder, which Harbor mounts at /logs/agent and syncs back after the run.
LOGS = "/logs/agent"
ARTIFACTS = "/logs/artifacts"
SCRIPTED = "scripted/"
# SQLite's online backup: one consistent file, the write-ahead log included (a copy of the .db
# file alone may miss what the log still holds).
_BACKUP = "import sqlite3, sys; sqlite3.connect(sys.argv[1]).backup(sqlite3.connect(sys.argv[2]))"


class TeachbackOptions(InstalledAgentOptions):
    wheel: str = Field(description="A teachback wheel on this machine (e.g. from `python -m build --wheel`).")
    find_links: str | None = Field(
        default=None,
        description="A folder of wheels of teachback's dependencies, for environments without a network.",
    )
    max_steps: int | None = Field(default=None, ge=1, description="Model calls per turn (teachback's max_steps).")


class Teachback(BaseInstalledAgent):
    """teachback, installed from a wheel and run headless with `teachback run`."""

    options_model = TeachbackOptions

    @staticmethod
    @override
    def name() -> str:
        return "teachback"

    @override
    def get_version_command(self) -> str | None:
        return f"{VENV}/bin/python -c 'import importlib.metadata as m; print(m.version(\"teachback\"))'"

    @property
    def _wheel(self) -> Path:
        wheel = Path(self.options.wheel).expanduser()
        if not wheel.is_file() or wheel.suffix != ".whl":
            raise ValueError(f"wheel={wheel}: not a wheel file; build one with `python -m build --wheel`")
        return wheel

    @override
    async def install(self, environment: BaseEnvironment) -> None:
        wheel = self._wheel
        await self.exec_as_root(environment, f"mkdir -p {INSTALL_DIR}")
        await environment.upload_file(wheel, f"{INSTALL_DIR}/{wheel.name}")
        offline = ""
        if self.options.find_links:
            await environment.upload_dir(Path(self.options.find_links).expanduser(), f"{INSTALL_DIR}/wheels")
            offline = f"--no-index --find-links {INSTALL_DIR}/wheels "
        await self.exec_as_root(
            environment,
            f"python3 -m venv {VENV} && {VENV}/bin/pip install --quiet {offline}{INSTALL_DIR}/{wheel.name} "
            f"&& {VENV}/bin/teachback --help > /dev/null",
        )

    async def _model(self, environment: BaseEnvironment) -> str:
        """The model string teachback runs with; a scripted model's script travels with it."""
        if not self.model_name:
            raise ValueError("teachback needs a model: harbor run -m PROVIDER/MODEL (or scripted/SCRIPT.json)")
        if not self.model_name.startswith(SCRIPTED):
            return self.model_name
        script = Path(self.model_name.removeprefix(SCRIPTED)).expanduser()
        if not script.is_file():
            raise ValueError(f"{self.model_name}: the script {script} is not a file on this machine")
        await environment.upload_file(script, f"{INSTALL_DIR}/script.json")
        return f"{SCRIPTED}{INSTALL_DIR}/script.json"

    @override
    @with_prompt_template
    async def run(self, instruction: str, environment: BaseEnvironment, context: AgentContext) -> None:
        model = await self._model(environment)
        steps = f"--max-steps {self.options.max_steps} " if self.options.max_steps else ""
        db = f"{LOGS}/feedback.db"
        teachback = f"{VENV}/bin/teachback"
        env = {"TEACHBACK_HOME": f"{LOGS}/teachback-home"}
        # The run's exit status is kept, but the trajectory is exported whatever it was: a stopped
        # or failed session is still a trajectory worth keeping.
        await self.exec_as_agent(
            environment,
            command=(
                f"{teachback} run --approval full-auto --model {shlex.quote(model)} {steps}--db {db} "
                f"{shlex.quote(instruction)} > {LOGS}/teachback.txt 2>&1; status=$?; "
                f"{teachback} export --db {db} --format atif --include-flagged --out {LOGS}/atif > /dev/null "
                f'&& for f in {LOGS}/atif/*.json; do cp "$f" {LOGS}/trajectory.json; done; '
                f"mkdir -p {ARTIFACTS} && {VENV}/bin/python -c {shlex.quote(_BACKUP)} {db} {ARTIFACTS}/feedback.db; "
                "exit $status"
            ),
            env=env,
        )

    @override
    def populate_context_post_run(self, context: AgentContext) -> None:
        trajectory = self.logs_dir / "trajectory.json"
        if not trajectory.is_file():
            self.logger.warning("teachback left no trajectory in %s: see teachback.txt beside it", self.logs_dir)
            return
        metrics = json.loads(trajectory.read_text(encoding="utf-8")).get("final_metrics") or {}
        context.n_input_tokens = metrics.get("total_prompt_tokens") or 0
        context.n_cache_tokens = metrics.get("total_cached_tokens") or 0
        context.n_output_tokens = metrics.get("total_completion_tokens") or 0
        context.cost_usd = metrics.get("total_cost_usd")
