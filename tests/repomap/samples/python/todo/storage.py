import json
from pathlib import Path

from .models import Task, TaskStore


def save_store(store: TaskStore, path: Path) -> None:
    rows = [{"title": t.title, "priority": t.priority, "done": t.done} for t in store.tasks]
    path.write_text(json.dumps(rows))


def load_store(path: Path) -> TaskStore:
    store = TaskStore()
    for row in json.loads(path.read_text()):
        task: Task = store.add(row["title"], row["priority"])
        if row["done"]:
            task.mark_done()
    return store
