import sys
from pathlib import Path

from .storage import load_store, save_store


def main(argv: list[str]) -> int:
    path = Path(argv[0])
    store = load_store(path)
    for title in argv[1:]:
        store.add(title)
    for task in store.pending():
        print(task.title)
    save_store(store, path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
