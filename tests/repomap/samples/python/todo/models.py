"""Task records and the in-memory store."""

from dataclasses import dataclass, field

DEFAULT_PRIORITY = 3


@dataclass
class Task:
    title: str
    priority: int = DEFAULT_PRIORITY
    done: bool = False

    def mark_done(self) -> None:
        self.done = True


@dataclass
class TaskStore:
    tasks: list[Task] = field(default_factory=list)

    def add(self, title: str, priority: int = DEFAULT_PRIORITY) -> Task:
        task = Task(title, priority)
        self.tasks.append(task)
        return task

    def pending(self) -> list[Task]:
        return [t for t in self.tasks if not t.done]

    def _index(self, title: str) -> int:
        return [t.title for t in self.tasks].index(title)
