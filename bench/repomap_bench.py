"""Repo map benchmark: teachback's RepoMap beside aider's and beside raw tree-sitter parsing.

    .venv/bin/python bench/repomap_bench.py [--repeats 3] [--tokens 1024]

Builds under .bench/: a git repository made from this Python's standard library (~2,400 files),
a ~600-file repository for the per-turn update, and a virtual environment with aider-chat from
the package index (.bench/aider-venv). Each figure is the median of --repeats runs, each in a
fresh process, timed around the map call; the "whole command" rows time the whole process from
outside (interpreter start, imports, map, exit). Runs of different kinds are interleaved so that
a busy machine slows them alike. Prints wall-clock medians, CPU medians and ratios, and checks
that every warm map is byte-identical to the cold one.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

from agent.repomap import estimate_tokens

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / ".bench"
CORPUS = BENCH / "stdlib-corpus"
SMALL = BENCH / "corpus-600"
AIDER_VENV = BENCH / "aider-venv"
SMALL_FILES = 600
PROCESSES = max(2, min(os.cpu_count() or 2, 8))

RAW_PARSE = """
import json, sys, time
from pathlib import Path
from agent.languages import get_parser, language_for_path
from agent.repomap.files import list_candidates, wanted
root = Path(sys.argv[1])
paths = [p for p in list_candidates(root) if wanted(p)]
parsers = {}
wall, cpu = time.perf_counter(), time.process_time()
for rel in paths:
    language = language_for_path(rel)
    parser = parsers.get(language) or parsers.setdefault(language, get_parser(language))
    parser.parse((root / rel).read_bytes())
print(json.dumps({"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu, "files": len(paths)}))
"""

# argv: root, tokens, workers, renders, map file (the first render's map), identifiers to mention
OURS = """
import json, sys, time
from pathlib import Path
from agent.repomap import RepoMap
root, tokens, workers, renders, out = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
repo_map = RepoMap(root, workers=workers)
times, texts = [], []
for _ in range(renders):
    wall, cpu = time.perf_counter(), time.process_time()
    texts.append(repo_map.render(tokens=tokens, mentioned=sys.argv[6:]))
    times.append({"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu,
                  "parsed": repo_map.parsed_files, "same_as_first": texts[-1] == texts[0]})
Path(out).write_text(texts[0])
print(json.dumps(times))
"""

UPDATE = """
import json, statistics, sys, time
from pathlib import Path
from agent.repomap import RepoMap
from agent.repomap.files import list_candidates
root, turns = Path(sys.argv[1]), int(sys.argv[2])
repo_map = RepoMap(root)
repo_map.render(tokens=1024)
target = sorted(root.rglob("*.py"))[len(list(root.rglob("*.py"))) // 2]
original = target.read_text()
disk, editor = [], []
for turn in range(turns):
    target.write_text(original + f"\\n\\ndef bench_turn_{turn}(value):\\n    return value\\n")
    start = time.perf_counter()
    text = repo_map.render(tokens=1024, edited_paths=[str(target)])
    disk.append((time.perf_counter() - start, repo_map.parsed_files))
for turn in range(turns):
    start = time.perf_counter()
    repo_map.update(str(target), original + f"\\n\\ndef bench_edit_{turn}(value):\\n    return value\\n")
    text = repo_map.render(tokens=1024, edited_paths=[str(target)])
    editor.append(time.perf_counter() - start)
target.write_text(original)
print(json.dumps({"disk": [t for t, _ in disk], "parsed": [p for _, p in disk], "editor": editor,
                  "files": len(list_candidates(root))}))
"""

AIDER = """
import json, os, sys, time, subprocess
root, tokens, runs, map_out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
os.chdir(root)
from aider.io import InputOutput
from aider.models import Model
from aider.repomap import RepoMap
files = [os.path.join(root, p) for p in subprocess.run(
    ["git", "ls-files"], capture_output=True, text=True, check=True).stdout.split()]
model = Model("gpt-4o")
io = InputOutput(pretty=False, yes=True, fancy_input=False)
repo_map = RepoMap(map_tokens=tokens, root=root, main_model=model, io=io, refresh="always",
                   map_mul_no_files=1)
times = []
for _ in range(runs):
    wall, cpu = time.perf_counter(), time.process_time()
    text = repo_map.get_repo_map([], files) or ""
    times.append({"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu})
ours = open(map_out).read()
print(json.dumps({"times": times, "ours_tiktoken": model.token_count(ours), "aider_chars": len(text)}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=1024)
    parser.add_argument("--no-aider", action="store_true", help="skip aider (no PyPI access)")
    args = parser.parse_args()

    build_corpus()
    build_small_corpus()
    aider_python = None if args.no_aider else ensure_aider()
    files = run_json(sys.executable, RAW_PARSE, CORPUS)["files"]
    print(f"corpus: {CORPUS} ({files} source files of {count_files(CORPUS)} files)\n")

    figures: dict[str, list[dict]] = {}
    mismatches: list[str] = []
    with tempfile.TemporaryDirectory() as scratch:
        map_file = Path(scratch) / "map.txt"
        for repeat in range(args.repeats):
            print(f"round {repeat + 1}/{args.repeats} ...", file=sys.stderr, flush=True)
            add(figures, "raw parse (1 process)", run_json(sys.executable, RAW_PARSE, CORPUS))
            for workers, label in ((1, "1 process"), (PROCESSES, f"{PROCESSES} processes")):
                home = Path(scratch) / f"home-{repeat}-{workers}"
                run_ours(figures, mismatches, home, args.tokens, workers, label, map_file)
            if aider_python:
                run_aider(figures, aider_python, args.tokens, map_file)
        home = Path(scratch) / "home-update"
        update = run_json(sys.executable, UPDATE, SMALL, 15, env={"TEACHBACK_HOME": str(home)})
        ours_map = map_file.read_text()

    report(figures, update, ours_map, args.tokens)
    print(
        "\nwarm maps (same process, new process, `teachback map`) byte-identical to the cold map:",
        "yes" if not mismatches else "NO: " + ", ".join(mismatches),
    )
    return 0 if not mismatches else 1


def run_ours(
    figures: dict[str, list], mismatches: list[str], home: Path, tokens: int, workers: int, label: str, map_file: Path
) -> None:
    """Cold and warm in one process (the cold map into `map_file`), warm in a new one, warm with a
    new focus in a new one (the stored graph, not the stored map), and the whole `teachback map`."""
    env = {"TEACHBACK_HOME": str(home)}
    warm_map = map_file.with_suffix(".warm.txt")
    cold, warm_same = run_json(sys.executable, OURS, CORPUS, tokens, workers, 2, map_file, env=env)
    add(figures, f"teachback cold ({label})", cold)
    add(figures, "teachback warm, same process", warm_same)
    if not warm_same["same_as_first"]:
        mismatches.append(f"same process ({label})")
    [warm_new] = run_json(sys.executable, OURS, CORPUS, tokens, workers, 1, warm_map, env=env)
    add(figures, "teachback warm, new process", warm_new)
    if warm_map.read_bytes() != map_file.read_bytes():
        mismatches.append(f"new process ({label})")
    [focus] = run_json(sys.executable, OURS, CORPUS, tokens, workers, 1, warm_map, "Popen", "urlopen", env=env)
    add(figures, "teachback warm, new process, new focus", focus)
    wall, cpu, out = timed_command([sys.executable, "-m", "cli", "map", "--workspace", CORPUS, "--tokens", tokens], env)
    add(figures, "teachback map, whole command (warm)", {"wall": wall, "cpu": cpu})
    if out != map_file.read_bytes():
        mismatches.append(f"`teachback map` ({label})")


def run_aider(figures: dict[str, list], aider_python: Path, tokens: int, map_file: Path) -> None:
    shutil.rmtree(CORPUS / ".aider.tags.cache.v4", ignore_errors=True)
    result = run_json(aider_python, AIDER, CORPUS, tokens, 2, map_file)
    add(figures, "aider cold", result["times"][0])
    add(figures, "aider warm, same process", result["times"][1])
    wall, cpu, out = timed_command([aider_python, "-c", AIDER, CORPUS, tokens, 1, map_file])
    result = json.loads(out.decode().strip().splitlines()[-1])
    add(figures, "aider warm, new process", result["times"][0])
    add(figures, "aider, whole script (warm)", {"wall": wall, "cpu": cpu})
    figures.setdefault("tiktoken", []).append(result["ours_tiktoken"])


def report(figures: dict[str, list], update: dict, ours_map: str, tokens: int) -> None:
    def median(label: str, key: str = "wall") -> float:
        return statistics.median(run[key] for run in figures[label])

    print(f"{'measurement (median)':40} {'wall s':>9} {'cpu s':>9}")
    for label in figures:
        if label != "tiktoken":
            print(f"{label:40} {median(label):9.3f} {median(label, 'cpu'):9.3f}")
    raw = "raw parse (1 process)"
    print("\nratios")
    for label in ("teachback cold (1 process)", f"teachback cold ({PROCESSES} processes)"):
        print(
            f"  {label} / raw parse: wall {median(label) / median(raw):.2f}x,"
            f" cpu {median(label, 'cpu') / median(raw, 'cpu'):.2f}x   (target <= 2x)"
        )
    if "aider cold" in figures:
        targets = {
            "teachback warm, same process": "   (target >= 10x)",
            "teachback warm, new process": "   (target >= 20x)",
        }
        for ours, theirs in (
            ("teachback warm, same process", "aider warm, same process"),
            ("teachback warm, new process", "aider warm, new process"),
            ("teachback warm, new process, new focus", "aider warm, new process"),
            ("teachback map, whole command (warm)", "aider, whole script (warm)"),
            ("teachback cold (1 process)", "aider cold"),
        ):
            print(f"  {theirs} / {ours}: {median(theirs) / median(ours):.1f}x faster" + targets.get(ours, ""))
        estimate = estimate_tokens(ours_map)
        real = statistics.median(figures["tiktoken"])
        print(
            f"\nteachback map at --tokens {tokens}: estimated {estimate} tokens,"
            f" gpt-4o tokenizer {real} ({real / estimate:.2f}x the estimate)"
        )
    disk_ms = statistics.median(update["disk"]) * 1000
    editor_ms = statistics.median(update["editor"]) * 1000
    print(f"\nper-turn update on {update['files']} files, one file changed (median of {len(update['disk'])}):")
    parsed = sorted(set(update["parsed"]))
    print(f"  changed on disk, render: {disk_ms:.0f} ms (files parsed per turn: {parsed})   (target < 300 ms)")
    print(f"  editor text via update(), render: {editor_ms:.0f} ms")


def add(figures: dict[str, list], label: str, run: dict) -> None:
    figures.setdefault(label, []).append(run)


def run_json(python: str | Path, code: str, *args: object, env: dict[str, str] | None = None):
    out = timed_command([python, "-c", code, *args], env)[2]
    return json.loads(out.decode().strip().splitlines()[-1])


def timed_command(command: list[object], env: dict[str, str] | None = None) -> tuple[float, float, bytes]:
    """(wall seconds, CPU seconds, stdout) of a whole process, run from the repository."""
    before, start = os.times(), time.perf_counter()
    result = subprocess.run(
        [str(part) for part in command],
        cwd=REPO,
        capture_output=True,
        env={**os.environ, **(env or {})},
        timeout=1800,
        check=False,
    )
    wall, after = time.perf_counter() - start, os.times()
    if result.returncode != 0:
        raise SystemExit(f"benchmark step failed:\n{result.stderr.decode(errors='replace')[-3000:]}")
    cpu = after.children_user + after.children_system - before.children_user - before.children_system
    return wall, cpu, result.stdout


def build_corpus() -> None:
    if (CORPUS / ".git").is_dir():
        return
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    print(f"building {CORPUS} from {stdlib} ...", file=sys.stderr, flush=True)
    shutil.copytree(
        stdlib, CORPUS, symlinks=True, ignore=shutil.ignore_patterns("site-packages", "__pycache__", "*.pyc")
    )
    git_commit(CORPUS)


def build_small_corpus() -> None:
    if (SMALL / ".git").is_dir():
        return
    sources = sorted(p for p in CORPUS.rglob("*.py") if ".git" not in p.parts)
    step = len(sources) / SMALL_FILES
    for index in range(SMALL_FILES):
        source = sources[int(index * step)]
        dest = SMALL / source.relative_to(CORPUS)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, dest)
    git_commit(SMALL)


def git_commit(root: Path) -> None:
    for command in (
        ["init", "-q", "-b", "main"],
        ["add", "-A"],
        ["-c", "user.email=bench@example.com", "-c", "user.name=bench", "commit", "-q", "-m", "corpus"],
    ):
        subprocess.run(["git", *command], cwd=root, check=True, capture_output=True)


def ensure_aider() -> Path | None:
    python = AIDER_VENV / "bin" / "python"
    if (
        python.exists()
        and subprocess.run([python, "-c", "import aider.repomap"], capture_output=True, check=False).returncode == 0
    ):
        return python
    print(f"installing aider-chat into {AIDER_VENV} ...", file=sys.stderr, flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", AIDER_VENV], check=True)
    result = subprocess.run(
        [python, "-m", "pip", "install", "-q", "aider-chat"], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        print(f"aider-chat could not be installed; skipping it:\n{result.stderr[-2000:]}", file=sys.stderr)
        return None
    return python


def count_files(root: Path) -> int:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout
    return listed.count(b"\0")


if __name__ == "__main__":
    sys.exit(main())
