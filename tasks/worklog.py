"""The work log beside a task file: every finished test run of a synthesis, one JSON line each,
so an interrupted synthesis resumes without running anything twice.

The first line names the configuration (snapshot, command, strategy, limits); a log written for
another configuration is started afresh. A line cut short by a kill is ignored.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


class WorkLog:
    def __init__(self, path: Path, config: dict[str, Any]) -> None:
        self.path = path
        self.config = config
        self.baseline: dict[str, Any] | None = None
        self.candidates: dict[str, dict[str, Any]] = {}
        self._load()

    def _load(self) -> None:
        if not self.path.is_file():
            self._start()
            return
        entries = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                entries.append(json.loads(line))
            except ValueError:
                log.info("work log %s: skipping a line cut short", self.path)
        if not entries or entries[0].get("config") != self.config:
            log.info("work log %s was written for other settings; starting afresh", self.path)
            self._start()
            return
        for entry in entries[1:]:
            if "baseline" in entry:
                self.baseline = entry["baseline"]
            elif "candidate" in entry:
                self.candidates[entry["candidate"]] = entry

    def _start(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps({"config": self.config}) + "\n", encoding="utf-8")

    def record_baseline(self, baseline: dict[str, Any]) -> None:
        self.baseline = baseline
        self._append({"baseline": baseline})

    def record_candidate(self, key: str, result: dict[str, Any]) -> None:
        entry = {"candidate": key, **result}
        self.candidates[key] = entry
        self._append(entry)

    def _append(self, entry: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry, separators=(",", ":")) + "\n")
            handle.flush()

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)
