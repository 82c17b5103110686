"""A recording process for the durability tests: records sessions and prints each event id once
the recorder has returned (the event is then acknowledged)."""

from __future__ import annotations

import sys

from feedback_store import Recorder, open_store
from tests.store.events import mixed_session


def main(db: str, sessions: int, label: str) -> None:
    recorder = Recorder(open_store(db))
    count = 0
    while sessions == 0 or count < sessions:  # 0: until killed
        for event in mixed_session(task=f"{label} {count}").events:
            recorder(event)
            print(event.id, flush=True)
        count += 1


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
