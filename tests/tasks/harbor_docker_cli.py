"""A Harbor environment for machines whose Docker has no Compose plugin (Harbor's own Docker
environment runs `docker compose`): Harbor's Apple Container environment, whose `container` CLI
takes the same commands as Docker's (build, run -d, exec, stop, rm, image rm), run with a
`container` on PATH that hands each command to `docker`. Imported by Harbor with
`--environment-import-path tests.tasks.harbor_docker_cli:DockerCli`; it needs Harbor (Python 3.12)."""

import re
import shutil
from typing import override

from harbor.environments.apple_container import AppleContainerEnvironment


class DockerCli(AppleContainerEnvironment):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Docker refuses names Apple's CLI takes: a separator may not follow another (`.__init__`)
        self._image_name = "hb-" + re.sub(r"[^a-z0-9]+", "-", self.environment_name.lower()).strip("-")

    @classmethod
    @override
    def preflight(cls) -> None:
        if not shutil.which("docker") or not shutil.which("container"):
            raise SystemExit('needs docker, and a `container` on PATH that runs `docker "$@"`')

    @staticmethod
    @override
    def type() -> str:
        return "docker-cli"
