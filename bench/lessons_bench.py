"""Lessons bench: do lessons stop an agent repeating a mistake, what do they cost in prompt tokens,
and how fast is retrieval at 100,000 stored pairs. Targets: >= 50% fewer repeats, call errors not
higher, copies of a quoted wrong value not above the arm without lessons, <= 10% more prompt tokens,
< 5 ms retrieval per failing step.

1. Scripted replays (the mechanism check): a deterministic agent with habits (`ReplayModel`) works
   through seeded sessions on one project: it sometimes sends a stale edit (and sometimes once more),
   a typo'd command, or a wrong path. Its random draws are shared by both arms; the only difference
   is whether lessons are shown. When a lesson prescribing the fix for its mistake is in its context
   it follows it with probability COMPLIANCE. So this part measures the mechanism — is the right
   lesson there at the repeated moment (the hit rate) and what that is worth to an agent that heeds
   it — not how far a real model heeds it. A repeated error is a failed call whose (tool, error
   kind, target) already failed earlier in the same session (within) or in an earlier one (across).
2. Held-out tasks with the embedded model (`--parts embedded`): tasks that fill the store, then
   other tasks with and without lessons. Rarely a repeat moment: a small model's wrong values differ
   from task to task.
3. The moment of a repeat, by state replay (`--parts states`, tasks.lesson_replay): each sample-suite
   task attempted twice per seed with lessons off; the first session's lessons (its own store only)
   shown at every state of the second as the session would show them (start block, and after each
   failing call of the recorded prefix), in each wording; K replies per state and arm under the same
   seeds, labelled by running them on a copy of the files. Per wording: repeats of the first
   session's failures, call errors, copies, calls enforcement would answer, prompt tokens; intervals
   resample tasks; the rule (RULE) is fixed here, before any run.
4. Retrieval at scale: a store of --pairs synthetic pairs written through the real schema and its
   triggers; per-step retrieval (`for_failure`) and the start-of-session block timed.

Confidence intervals: 95% percentile bootstrap, over sessions (1, 2, paired across arms) or tasks (3).
Run: .venv/bin/python bench/lessons_bench.py [--parts replay states latency] [--seeds 0 1 2]
     [--state-tasks 12] [--state-samples 2] [--wordings prescriptive descriptive fix_only]
     [--pairs 100000] [--out .bench/lessons-bench.json] [--json] [--merge A.json B.json]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agent.config import Settings
from agent.model import ModelReply
from agent.protocol import Event, LessonsShown, ModelUsage, ToolCallFinished, UserInput
from agent.runtime import open_session, system_prompt
from agent.session import Session
from agent.tools import ToolContext, default_toolbox
from agent.workspace import Workspace
from feedback_store import Recorder, open_store
from feedback_store.lessons.book import LessonBook, estimate_tokens
from feedback_store.lessons.distill import lesson_id, refresh

P_MISTAKE, P_AGAIN, COMPLIANCE = 0.6, 0.5, 0.8
FILES = 10


# -- counting -----------------------------------------------------------------------------------


class Tally:
    """A session's errors, repeats and prompt tokens, from its events; `seen` is what failed in
    the arm's earlier sessions."""

    def __init__(self, seen: set[tuple]) -> None:
        self.seen = seen
        self.mine: list[tuple] = []
        self.calls = self.within = self.across = self.prompt = self.lesson_tokens = 0
        # Failures in a situation that failed in an earlier session, and how many of them had a lesson
        # naming the situation in the model's context by the end of that step (start block or result).
        self.repeat_moments = self.hits = 0
        self._lessons_in_context = 0
        self._told: set[str] = set()  # ids of the lessons shown so far
        self._waiting: dict[str, str] = {}  # call id -> the id of the lesson of its situation, not yet shown

    def __call__(self, event: Event) -> None:
        if isinstance(event, LessonsShown):
            self._lessons_in_context += event.tokens
            self._told.update(lesson["id"] for lesson in event.lessons)
            wanted = self._waiting.pop(event.call_id or "", None)
            if wanted is not None and wanted in self._told:
                self.hits += 1
        elif isinstance(event, ModelUsage):
            self.prompt += event.prompt_tokens
            self.lesson_tokens += self._lessons_in_context
        elif isinstance(event, ToolCallFinished) and event.error_kind != "interrupted":
            self.calls += 1
            if event.ok:
                return
            situation = (event.name, event.error_kind, event.target)
            if situation in self.mine:
                self.within += 1
            elif situation in self.seen:
                self.across += 1
            if situation in self.seen:
                self.repeat_moments += 1
                if lesson_id(situation) in self._told:  # a lesson of this situation, whatever its wording
                    self.hits += 1
                else:
                    self._waiting[event.call_id] = lesson_id(situation)
            self.mine.append(situation)

    def figures(self) -> dict[str, int]:
        self.seen.update(self.mine)
        return {
            "errors": len(self.mine),
            "within": self.within,
            "across": self.across,
            "repeated": self.within + self.across,
            "calls": self.calls,
            "prompt_tokens": self.prompt,
            "lesson_tokens": self.lesson_tokens,
            "repeat_moments": self.repeat_moments,
            "hits": self.hits,
        }


def bootstrap_reduction(without: list[dict], with_: list[dict], key: str, seed: int, rounds: int = 4000):
    """1 - sum(with)/sum(without) over sessions paired by index, with a 95% bootstrap interval."""
    rnd = random.Random(seed)
    pairs = list(zip(without, with_, strict=True))

    def reduction(sample: list[tuple[dict, dict]]) -> float | None:
        base = sum(a[key] for a, _ in sample)
        return None if base == 0 else 1 - sum(b[key] for _, b in sample) / base

    point = reduction(pairs)
    draws = sorted(r for r in (reduction([rnd.choice(pairs) for _ in pairs]) for _ in range(rounds)) if r is not None)
    if point is None or not draws:
        return {"reduction": None, "ci95": None}
    return {
        "reduction": round(point, 3),
        "ci95": [round(draws[int(0.025 * len(draws))], 3), round(draws[int(0.975 * len(draws)) - 1], 3)],
    }


# -- 1. scripted replays ------------------------------------------------------------------------


def make_project(root: Path) -> None:
    root.mkdir(parents=True)
    for i in range(FILES):
        (root / f"mod{i}.py").write_text(f'"""Module {i}."""\n\n\ndef scale{i}(x):\n    return x * {i + 2}\n')
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "init"]):
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def session_jobs(rnd: random.Random) -> list[dict[str, Any]]:
    """What one session does: two edits of distinct files, and a command or a read."""
    jobs = []
    for i in rnd.sample(range(FILES), 2):
        path, line = f"mod{i}.py", f"    return x * {i + 2}"
        right = {"path": path, "old_text": line, "new_text": line + "  # checked"}
        jobs.append(
            {
                "tool": "edit_file",
                "target": path,
                "prepare": ("read_file", {"path": path}),
                "wrong": [
                    {**right, "old_text": line.replace(" * ", "*")},
                    {**right, "old_text": line.replace("    ", "\t")},
                ],
                "right": right,
            }
        )
    if rnd.random() < 0.5:
        typo = "pyhton -m compileall -q ."
        jobs.append(
            {
                "tool": "run_command",
                "target": typo,
                "prepare": None,
                "wrong": [{"command": typo}],
                "right": {"command": f"{sys.executable} -m compileall -q ."},
            }
        )
    else:
        i = rnd.randrange(FILES)
        jobs.append(
            {
                "tool": "read_file",
                "target": f"src/mod{i}.py",
                "prepare": None,
                "wrong": [{"path": f"src/mod{i}.py"}],
                "right": {"path": f"mod{i}.py"},
            }
        )
    return [{**job, "draws": [rnd.random() for _ in range(4)]} for job in jobs]


class ReplayModel:
    """A deterministic agent with habits (satisfies agent.interfaces.Model); see the module text."""

    name = "replay/habits"

    def __init__(self, jobs: list[dict[str, Any]]) -> None:
        self._plan = self._policy(jobs)
        self._system = ""
        self._started = False
        self._tools_tokens: int | None = None

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], on_delta=None) -> ModelReply:
        if self._tools_tokens is None:
            self._tools_tokens = estimate_tokens(json.dumps(tools))
        if not self._started:
            self._system, self._started = messages[0]["content"], True
            name, args = next(self._plan)
        else:
            name, args = self._plan.send(messages[-1].get("content") or "")
        call = {
            "id": f"call_{len(messages)}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)},
        }
        prompt = self._tools_tokens + estimate_tokens(json.dumps(messages))
        return ModelReply(
            message={"role": "assistant", "content": None, "tool_calls": [call]},
            prompt_tokens=prompt,
            completion_tokens=estimate_tokens(call["function"]["arguments"]),
        )

    def _policy(self, jobs: list[dict[str, Any]]):
        for job in jobs:
            yield from self._job(job)
        yield "finish", {"summary": "done"}

    def _job(self, job: dict[str, Any]):
        heed_start, slip, heed_result, again = job["draws"]
        if not (names(self._system, job) and heed_start < COMPLIANCE) and slip < P_MISTAKE:
            result = yield job["tool"], job["wrong"][0]
            told = names(result, job) and heed_result < COMPLIANCE
            if not told and again < P_AGAIN and len(job["wrong"]) > 1:
                yield job["tool"], job["wrong"][1]
        if job["prepare"]:
            yield job["prepare"]
        yield job["tool"], job["right"]


def names(text: str, job: dict[str, Any]) -> bool:
    """Whether `text` holds a lesson about this job's mistake, as an agent reading it would tell:
    the working call it prescribes (its tool and first argument, as lessons quote a fix) or, where
    no fix was recorded, the failed call itself."""
    key, value = next(iter(job["right"].items()))
    fix = f"{job['tool']}({key}={json.dumps(value)}"[:40]
    return fix in text or f"{job['tool']} on {job['target']} failed" in text


async def replay_arm(root: Path, db: Path, seed: int, sessions: int, lessons: bool, budget: int) -> list[dict]:
    rnd = random.Random(seed)
    store = open_store(db)
    book = LessonBook(store) if lessons else None
    seen: set[tuple] = set()
    figures = []
    for _ in range(sessions):
        settings = Settings(
            model=ReplayModel.name, approval="full-auto", repo_map_tokens=0, lessons=lessons, lessons_tokens=budget
        )
        context = ToolContext(workspace=Workspace(root), settings=settings)
        jobs = session_jobs(rnd)
        session = Session(
            model=ReplayModel(jobs),
            toolbox=default_toolbox(),
            context=context,
            frontend="bench",
            system_prompt=lambda first, c=context: system_prompt(c, first),
            lessons=book,
        )
        tally = Tally(seen)
        session.subscribe(Recorder(store))
        session.subscribe(tally)
        named = sorted({job["target"] for job in jobs if job["tool"] == "edit_file"})
        await session.run(UserInput(text=f"Tidy {' and '.join(named)}, then check the project."))
        figures.append(tally.figures())
        subprocess.run(["git", "checkout", "-q", "--", "."], cwd=root, check=True)
    store.close()
    return figures


def replay(scratch: Path, seeds: list[int], sessions: int, budget: int) -> dict[str, Any]:
    arms: dict[str, list[dict]] = {"without": [], "with": []}
    for seed in seeds:
        for arm in arms:
            root = scratch / f"replay-{seed}-{arm}"
            make_project(root)
            db = scratch / f"replay-{seed}-{arm}.db"
            arms[arm] += asyncio.run(replay_arm(root, db, seed, sessions, arm == "with", budget))
    return summarize(arms, seeds[0])


def summarize(arms: dict[str, list[dict]], seed: int) -> dict[str, Any]:
    total = {arm: {k: sum(s[k] for s in rows) for k in rows[0]} for arm, rows in arms.items() if rows}
    out: dict[str, Any] = {"sessions": len(arms["without"]), "totals": total}
    for key in ("repeated", "within", "across", "errors"):
        out[f"{key}_reduction"] = bootstrap_reduction(arms["without"], arms["with"], key, seed)
    with_ = total["with"]
    out["prompt_overhead"] = round(with_["lesson_tokens"] / max(1, with_["prompt_tokens"]), 4)
    out["prompt_net_change"] = round(with_["prompt_tokens"] / max(1, total["without"]["prompt_tokens"]) - 1, 4)
    out["hit_rate"] = round(with_["hits"] / with_["repeat_moments"], 3) if with_["repeat_moments"] else None
    return out


# -- 2. held-out tasks with the embedded model ----------------------------------------------------


def embedded(scratch: Path, seeds: list[int], n_tasks: int, sampling: dict[str, Any]) -> dict[str, Any]:
    from importlib import resources

    from tasks.records import load_tasks

    task_file = Path(str(resources.files("tasks").joinpath("suites/sample.jsonl")))
    arms: dict[str, list[dict]] = {"without": [], "with": []}
    rewards: dict[str, list[float]] = {"without": [], "with": []}
    for seed in seeds:
        order = load_tasks(task_file)
        random.Random(seed).shuffle(order)
        learn, held = order[: n_tasks // 2], order[n_tasks // 2 : n_tasks]
        learn_db, seen = scratch / f"learn-{seed}.db", set()
        for task in learn:
            attempt(task, task_file, learn_db, scratch, seen, lessons=False, sampling=sampling)
        for arm in arms:
            db = scratch / f"held-{seed}-{arm}.db"
            copy_db(learn_db, db)
            arm_seen = set(seen)
            for task in held:
                figures, reward = attempt(
                    task, task_file, db, scratch, arm_seen, lessons=arm == "with", sampling=sampling
                )
                arms[arm].append(figures)
                rewards[arm].append(reward)
    out = summarize(arms, seeds[0])
    out["pass@1"] = {arm: round(statistics.mean(r), 3) if r else None for arm, r in rewards.items()}
    return out


def attempt(task: Any, task_file: Path, db: Path, scratch: Path, seen: set, *, lessons: bool, sampling: dict):
    from tasks.grade import grade
    from tasks.rollout import AttemptSpec, attempt_settings
    from tasks.seal import make_workspace

    dest = Path(tempfile.mkdtemp(dir=scratch)) / "workspace"
    workspace = make_workspace(task, task_file, dest, tests=task.tests)
    spec = AttemptSpec(
        task=task,
        task_file=str(task_file),
        attempt=0,
        model="local/smollm2",
        db=str(db),
        overrides={**sampling, "lessons": lessons},
    )
    settings = attempt_settings(workspace, spec)
    store = open_store(db)
    book = LessonBook(store) if lessons else None
    session = open_session(workspace, settings, frontend="bench", lessons=book)
    tally = Tally(seen)
    session.subscribe(Recorder(store))
    session.subscribe(tally)
    asyncio.run(session.run(UserInput(text=task.problem_statement)))
    store.close()
    reward = grade(task, task_file, workspace).reward
    shutil.rmtree(dest.parent, ignore_errors=True)
    print(
        f"  embedded {task.instance_id} lessons={lessons}: {tally.calls} calls, {len(tally.mine)} errors, "
        f"reward {reward:g}",
        file=sys.stderr,
        flush=True,
    )
    return tally.figures(), float(reward)


def copy_db(source: Path, dest: Path) -> None:
    with sqlite3.connect(source) as src, sqlite3.connect(dest) as out:
        src.backup(out)


# -- 3. retrieval at scale ------------------------------------------------------------------------

TOOLS = [
    ("edit_file", "no_match"),
    ("edit_file", "ambiguous"),
    ("read_file", "not_found"),
    ("run_command", "exit_status"),
    ("create_file", "exists"),
    ("edit_file", "bad_arguments"),
]


def synthetic_store(path: Path, pairs: int, seed: int, index: bool = True) -> float:
    """Write `pairs` failures (half corrected) through the real schema and (unless `index` is off)
    its lesson triggers; µs per pair."""
    rnd = random.Random(seed)
    store = open_store(path)
    if not index:
        for (name,) in store.db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
            store.db.execute(f"DROP TRIGGER {name}")
    files = [f"pkg{i % 40}/mod{i}.py" for i in range(4000)]
    started = time.perf_counter()
    with store.write() as conn:
        for n in range(pairs):
            sid = f"s{n // 25:06d}"
            if n % 25 == 0:
                conn.execute(
                    "INSERT INTO sessions (id, workspace, model, started_at) VALUES (?, ?, ?, ?)",
                    (sid, f"/work/project{n // 25 % 50}", rnd.choice(["m-a", "m-b"]), n),
                )
            tool, kind = rnd.choice(TOOLS)
            target = rnd.choice(files) if tool != "run_command" else rnd.choice(["pytest -q", "make test", "npm test"])
            seq = (n % 25) * 4 + 1
            feedback = (
                f"{tool} failed ({kind}) on {target}: name_{rnd.randrange(3000)} "
                f"{' '.join(rnd.choice(['alpha', 'beta', 'parse', 'render', 'cache']) for _ in range(20))}"
            )
            arguments = json.dumps({"path": target, "old_text": f"def f{rnd.randrange(999)}():"})
            conn.execute(
                "INSERT INTO tool_calls (id, session_id, call_id, name, arguments, message_seq, status) "
                "VALUES (?, ?, ?, ?, ?, ?, 'error')",
                (f"t{n}", sid, f"c{n}", tool, arguments, seq),
            )
            fixed = rnd.random() < 0.5
            if fixed:
                conn.execute(
                    "INSERT INTO messages (session_id, seq, role, message) VALUES (?, ?, 'assistant', ?)",
                    (
                        sid,
                        seq + 2,
                        json.dumps(
                            {"role": "assistant", "tool_calls": [{"function": {"name": tool, "arguments": arguments}}]}
                        ),
                    ),
                )
            conn.execute(
                """INSERT INTO pairs (id, session_id, source, tool, error_kind, target, feedback,
                completion_seq, correction_seq, created_at) VALUES (?, ?, 'tool', ?, ?, ?, ?, ?, ?, ?)""",
                (f"p{n}", sid, tool, kind, target, feedback, seq, seq + 2 if fixed else None, n),
            )
    per_pair = (time.perf_counter() - started) / pairs * 1e6
    store.close()
    return per_pair


def latency(scratch: Path, pairs: int, seed: int, queries: int = 500) -> dict[str, Any]:
    path = scratch / "scale.db"
    plain_us = synthetic_store(scratch / "plain.db", min(pairs, 10_000), seed, index=False)
    write_us = synthetic_store(path, pairs, seed)
    store = open_store(path)
    clock = time.perf_counter()
    distilled = refresh(store, limit=None)
    distil_s = time.perf_counter() - clock
    book = LessonBook(store)
    rnd = random.Random(seed)
    rows = store.query("SELECT tool, error_kind, target, feedback FROM pairs ORDER BY random() LIMIT ?", (queries,))
    timings: dict[str, list[float]] = {"same situation": [], "new situation": [], "cpu (both)": []}
    for row in rows:
        for case, target in (
            ("same situation", row["target"]),
            ("new situation", f"other/new{rnd.randrange(10**6)}.py"),
        ):
            clock, cpu = time.perf_counter(), time.thread_time()
            book.for_failure(
                tool=row["tool"],
                error_kind=row["error_kind"],
                target=target,
                call="",
                feedback=row["feedback"],
                workspace="/work/project7",
                session_id="live",
            )
            timings[case].append((time.perf_counter() - clock) * 1000)
            timings["cpu (both)"].append((time.thread_time() - cpu) * 1000)
    blocks = []
    for i in range(20):
        clock = time.perf_counter()
        book.session_block(f"/work/project{i}", "m-a", 300)
        blocks.append((time.perf_counter() - clock) * 1000)
    lessons = store.query("SELECT count(*) AS n FROM lessons")[0]["n"]
    store.close()

    def spread(ms: list[float]) -> dict[str, float]:
        ordered = sorted(ms)
        return {
            "median_ms": round(statistics.median(ordered), 3),
            "p95_ms": round(ordered[int(0.95 * len(ordered))], 3),
            "max_ms": round(ordered[-1], 3),
        }

    return {
        "pairs": pairs,
        "lessons": lessons,
        "pair_write_us": {"with_index": round(write_us, 1), "without": round(plain_us, 1)},
        "load_average": [round(x, 1) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        "distil_pairs_per_s": round(distilled / distil_s),
        "for_failure": {k: spread(v) for k, v in timings.items()},
        "session_block": spread(blocks),
    }


# -- 3. the moment of a repeat: state replay with the embedded model ------------------------------

REPEAT_TARGET = -0.5  # the issue's: at least half the repeats gone
RULE = (
    "per wording, repeats per sample against no lessons: shown: change <= -50% and upper < 0; "
    "refuted: lower > -50%; else inconclusive (95% bootstrap over tasks, paired by seed)"
)
# The bootstrap's interval collapses to one point when an arm has no event at all (every resample
# then gives -100%), however few events the other arm had, so it cannot refute anything there. The same
# thresholds are therefore also read off an exact interval that counts events: samples matched by seed,
# state and draw, the odds ratio of the discordant ones (Clopper-Pearson, conditional on their number).
# It treats samples as independent (no clustering by task), so it is the narrower of what is honest.
EXACT_RULE = (
    "the same thresholds on the matched-pairs odds ratio: samples paired by seed, state and draw; "
    "exact 95% interval from the discordant pairs"
)


def matched_change(rows: list[dict[str, Any]], arm: str, key: str) -> dict[str, Any]:
    """`key` in `arm` against the arm without lessons, sample by sample (the same seed, state and draw):
    the odds ratio of the discordant pairs minus one, its exact interval, and the verdict by RULE's
    thresholds on it."""
    without = {(r["seed"], r["state"], r["k"]): bool(r[key]) for r in rows if r["arm"] == "none"}
    pairs = [(without[(r["seed"], r["state"], r["k"])], bool(r[key])) for r in rows if r["arm"] == arm]
    only_without = sum(b and not a for b, a in pairs)
    only_with = sum(a and not b for b, a in pairs)
    both = sum(a and b for b, a in pairs)
    out: dict[str, Any] = {"only_without": only_without, "only_with": only_with, "both": both}
    discordant = only_without + only_with
    if not discordant:
        return out | {"relative_change": None, "interval": None, "verdict": None}
    from tasks.verdict import clopper_pearson

    low, high = clopper_pearson(only_with, discordant)
    interval = [round(low / (1 - low) - 1, 4), None if high >= 1 else round(high / (1 - high) - 1, 4)]
    point = None if not only_without else round(only_with / only_without - 1, 4)
    upper = math.inf if interval[1] is None else interval[1]
    verdict = None
    if point is not None:
        verdict = (
            "shown"
            if point <= REPEAT_TARGET and upper < 0
            else "refuted"
            if interval[0] > REPEAT_TARGET
            else "inconclusive"
        )
    return out | {"relative_change": point, "interval": interval, "verdict": verdict}


def states_part(
    scratch: Path, seeds: list[int], n_tasks: int, samples: int, per_session: int, sampling: dict, wordings: list[str]
) -> dict[str, Any]:
    """Each task twice per seed (attempts 2s and 2s+1, lessons off); the first session's lessons shown
    at every state of the second, K samples per arm under seeds 0..K-1 (fixed before the run)."""
    from tasks.lesson_replay import calls_of, copies, lesson_rows, recorded, repeats, with_lessons
    from tasks.records import load_tasks
    from tasks.rollout import AttemptSpec, run_attempt
    from tasks.sample_suite import sample_suite_path
    from tasks.states import Sampler, Scratch, label_reply, load_states, replayable

    task_file = sample_suite_path()
    tasks = {t.instance_id: t for t in load_tasks(task_file)}
    arms = ["none", *wordings]
    rows: list[dict[str, Any]] = []  # one per sample
    sampler = Sampler("local/smollm2", cap=sampling["max_tokens"])
    for seed in seeds:
        chosen = sorted(tasks)
        random.Random(seed).shuffle(chosen)
        second_db = scratch / f"second-{seed}.db"
        firsts: dict[str, Path] = {}
        for task_id in chosen[:n_tasks]:
            firsts[task_id] = scratch / f"first-{seed}-{len(firsts)}.db"
            for attempt, db in ((2 * seed, firsts[task_id]), (2 * seed + 1, second_db)):
                spec = AttemptSpec(
                    task=tasks[task_id],
                    task_file=str(task_file),
                    attempt=attempt,
                    model="local/smollm2",
                    db=str(db),
                    work_dir=str(scratch / "work"),
                    overrides={k: v for k, v in sampling.items() if v is not None},
                )
                done = run_attempt(spec)
                if "error" in done:
                    raise RuntimeError(f"the attempt {task_id} #{attempt} failed: {done['error']}")
            say(f"  states seed {seed}: {task_id} recorded twice")
        books = {task_id: LessonBook(open_store(db), owns_store=True) for task_id, db in firsts.items()}
        first = {}
        for task_id, book in books.items():
            (session_id,) = book.store.task_sessions()
            first[task_id] = recorded(book.store.events(session_id)).failures
        lessons = {task_id: lesson_rows(book) for task_id, book in books.items()}
        store = open_store(second_db)
        sessions = {sid: recorded(store.events(sid)) for sid in store.task_sessions()}
        store.close()
        states = [s for s in load_states(second_db, max_per_session=per_session) if replayable(s)]
        for number, state in enumerate(states, 1):
            book, session = books[state.task_id], sessions[state.session_id]
            scratch_files = Scratch(state, tasks[state.task_id], task_file)
            try:
                shown = {
                    w: with_lessons(state, session, book, lessons[state.task_id], w, scratch_files.root)
                    for w in wordings
                }
                for arm in arms:
                    at = dataclasses.replace(state, messages=shown[arm].messages) if arm != "none" else state
                    for k in range(samples):
                        reply = asyncio.run(sampler.sample(at, k))
                        copy = scratch_files.copy(f"{arm}-{k}")
                        try:
                            label = asyncio.run(
                                label_reply(at, reply, copy, tasks[state.task_id], task_file, sampler.cap)
                            )
                        finally:
                            shutil.rmtree(copy.parent, ignore_errors=True)
                        calls = calls_of(reply)
                        enforced = any(
                            book.known_failure(
                                tool=tool,
                                target=target,
                                workspace=str(scratch_files.root),
                                repository=session.repository,
                            )
                            for tool, target in calls
                        )
                        row = {"seed": seed, "task": state.task_id, "state": f"{state.session_id}:{state.step}"}
                        row |= {"arm": arm, "k": k, "kind": label.kind, "call_error": label.call_error}
                        row |= {"repeat": repeats(label, first[state.task_id]), "enforced": enforced}
                        row |= {
                            "prompt_tokens": reply.prompt_tokens,
                            "lessons": len(shown[arm].lessons) if arm != "none" else 0,
                        }
                        for wording in wordings:  # copies counted against each wording's quoted values
                            row[f"copy_{wording}"] = copies(calls, shown[wording].quoted)
                        rows.append(row)
            finally:
                scratch_files.close()
            say(f"  states seed {seed}: state {number}/{len(states)} ({state.task_id} step {state.step})")
        for book in books.values():
            book.close()
    return summarize_states(rows, arms, seeds[0])


def summarize_states(rows: list[dict[str, Any]], arms: list[str], seed: int) -> dict[str, Any]:
    from tasks.verdict import Pair, detectable_change, relative_change

    def pairs(arm: str, key: str) -> list[Pair]:
        """Samples matched by seed, state and draw; clustered by seed and task."""
        without = {(r["seed"], r["state"], r["k"]): bool(r[key]) for r in rows if r["arm"] == "none"}
        return [
            Pair(f"{r['seed']}:{r['task']}", without[(r["seed"], r["state"], r["k"])], bool(r[key]))
            for r in rows
            if r["arm"] == arm
        ]

    def rate(arm: str, key: str) -> float | None:
        mine = [bool(r[key]) for r in rows if r["arm"] == arm]
        return round(sum(mine) / len(mine), 4) if mine else None

    base_tokens = sum(r["prompt_tokens"] for r in rows if r["arm"] == "none")
    out: dict[str, Any] = {
        "rule": RULE,
        "exact_rule": EXACT_RULE,
        "samples": sum(r["arm"] == "none" for r in rows),
        "states": len({(r["seed"], r["state"]) for r in rows}),
        "tasks": len({(r["seed"], r["task"]) for r in rows}),
        "detectable_repeat_change": detectable_change(
            [(f"{r['seed']}:{r['task']}", bool(r["repeat"])) for r in rows if r["arm"] == "none"], seed
        ),
        "none": {
            "repeat_rate": rate("none", "repeat"),
            "call_error_rate": rate("none", "call_error"),
            "enforceable": rate("none", "enforced"),
        },
        "wordings": {},
    }
    for arm in arms[1:]:
        repeats = relative_change(pairs(arm, "repeat"), seed)
        low, high = repeats["interval"] or (None, None)
        point = repeats["relative_change"]
        verdict = None
        if point is not None and low is not None:
            upper = math.inf if high is None else high
            verdict = (
                "shown"
                if point <= REPEAT_TARGET and upper < 0
                else "refuted"
                if low > REPEAT_TARGET
                else "inconclusive"
            )
        out["wordings"][arm] = {
            "repeat_rate": rate(arm, "repeat"),
            "repeats": {**repeats, "verdict": verdict},
            "repeats_exact": matched_change(rows, arm, "repeat"),
            "call_errors_exact": matched_change(rows, arm, "call_error"),
            "call_errors": relative_change(pairs(arm, "call_error"), seed),
            "copy_rate": rate(arm, f"copy_{arm}"),
            "copy_rate_without_lessons": rate("none", f"copy_{arm}"),
            "enforceable": rate(arm, "enforced"),
            "prompt_tokens_added": round(
                sum(r["prompt_tokens"] for r in rows if r["arm"] == arm) / max(1, base_tokens) - 1, 4
            ),
            "states_with_lessons": len({(r["seed"], r["state"]) for r in rows if r["arm"] == arm and r["lessons"]}),
        }
    out["rows"] = rows
    return out


def merge_states(files: list[Path]) -> dict[str, Any]:
    """One summary of the samples of several runs of the states part (their seeds must differ)."""
    rows, wordings, seeds = [], None, set()
    for path in files:
        part = json.loads(path.read_text())["states"]
        found = list(part["wordings"])
        if wordings not in (None, found):
            raise SystemExit(f"{path} compared the wordings {found}, the others {wordings}: merge like runs")
        wordings = found
        mine = {row["seed"] for row in part["rows"]}
        if mine & seeds:
            raise SystemExit(f"{path} repeats the seeds {sorted(mine & seeds)}: merge runs of distinct seeds")
        seeds |= mine
        rows += part["rows"]
    out = summarize_states(rows, ["none", *(wordings or [])], min(seeds))
    out["merged"] = [str(p) for p in files]
    return out


def other_parts(files: list[Path]) -> dict[str, Any]:
    """The parts beside the states (replays, held-out tasks, retrieval) of the runs being merged: each
    from the first file that ran it, so a merged summary still reports every part of the run."""
    out: dict[str, Any] = {}
    for path in files:
        doc = json.loads(path.read_text())
        for part in ("replay", "embedded", "latency"):
            if part in doc and part not in out:
                out[part] = doc[part] | {"from": str(path)}
    return out


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# -- the run --------------------------------------------------------------------------------------


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:+.0f}%"


def _interval(found: dict[str, Any] | None) -> str:
    if not found or not found.get("interval"):
        return "no interval"
    low, high = found["interval"]
    return f"{_pct(found.get('relative_change'))} [{_pct(low)}, {'+inf' if high is None else _pct(high)}]"


def render(results: dict[str, Any]) -> str:
    """The figures as text: every arm, its interval and what the run could detect."""
    lines = []
    if "replay" in results:
        r = results["replay"]
        lines.append(
            f"scripted replays ({r['sessions']} sessions per arm): repeated errors "
            f"{_pct(-r['repeated_reduction']['reduction'] if r['repeated_reduction']['reduction'] is not None else None)} "
            f"ci95 of the reduction {r['repeated_reduction']['ci95']}, lesson hit rate {r['hit_rate']}, "
            f"prompt tokens {_pct(r['prompt_net_change'])} net ({r['prompt_overhead']:.1%} of them lessons)"
        )
    if "embedded" in results:
        e = results["embedded"]
        lines.append(f"held-out tasks, embedded model: repeated errors reduction {e['repeated_reduction']}")
    if "states" in results:
        st = results["states"]
        lines.append(
            f"state replay, embedded model: {st['states']} states of {st['tasks']} tasks' second sessions, "
            f"{st['samples']} samples per arm; {st['rule']}"
        )
        none = st["none"]
        lines.append(
            f"  no lessons: repeats {none['repeat_rate']}, call errors {none['call_error_rate']}, "
            f"enforceable {none['enforceable']}; detectable change in repeats {_pct(st['detectable_repeat_change'])}"
        )
        lines.append(
            f"  {'wording':14}{'repeats':>10}  change [95%]               {'call errors':28}copy (none)   tokens"
        )
        for name, w in st["wordings"].items():
            lines.append(
                f"  {name:14}{w['repeat_rate']!s:>10}  {_interval(w['repeats']):26} {w['repeats']['verdict']!s:13}"
                f"{_interval(w['call_errors']):28}{w['copy_rate']!s} ({w['copy_rate_without_lessons']!s})  "
                f"{_pct(w['prompt_tokens_added'])}"
            )
        lines.append(f"  exact, {st['exact_rule']}:")
        for name, w in st["wordings"].items():
            exact = w.get("repeats_exact") or {}
            lines.append(
                f"  {name:14}repeats only without {exact.get('only_without')}, only with {exact.get('only_with')}, "
                f"both {exact.get('both')}: {_interval(exact)} {exact.get('verdict')}"
            )
    if "latency" in results:
        lat = results["latency"]
        lines.append(f"retrieval at {lat.get('pairs')} pairs: {json.dumps(lat.get('for_failure'))}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--sessions", type=int, default=30, help="replay sessions per seed and arm")
    parser.add_argument("--embedded-tasks", type=int, default=6, help="sample-suite tasks per seed (half held out)")
    parser.add_argument("--embedded-seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--max-steps", type=int, default=8)
    parser.add_argument("--temperature", type=float, help="the embedded model's (default: the setting's)")
    parser.add_argument("--pairs", type=int, default=100_000)
    parser.add_argument("--lessons-tokens", type=int, default=Settings().lessons_tokens, help="start-block budget")
    parser.add_argument("--state-tasks", type=int, default=12, help="sample-suite tasks per seed, each attempted twice")
    parser.add_argument("--state-seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--state-samples", type=int, default=2, help="replies per state and arm (seeds 0..K-1)")
    parser.add_argument("--state-steps", type=int, default=4, help="agent steps per recorded attempt")
    parser.add_argument("--per-session", type=int, default=4, help="states of each second session at most")
    parser.add_argument("--max-tokens", type=int, default=96, help="tokens per reply, recorded and sampled")
    parser.add_argument("--threads", type=int, default=1, help="the embedded model's threads (recorded and sampled)")
    parser.add_argument("--wordings", nargs="+", default=["prescriptive", "descriptive", "fix_only"])
    parser.add_argument("--json", action="store_true", help="print one JSON object (the last line) and nothing else")
    parser.add_argument("--parts", nargs="+", default=["replay", "states", "latency"])
    parser.add_argument(
        "--merge",
        type=Path,
        nargs="+",
        metavar="FILE",
        help="summarize the states parts of earlier --out files as one run (e.g. seeds run in parallel)",
    )
    parser.add_argument("--out", type=Path, default=Path(".bench/lessons-bench.json"))
    args = parser.parse_args()
    results: dict[str, Any] = {
        "format": "teachback-lessons-bench-1",
        "seeds": args.seeds,
        "compliance": COMPLIANCE,
        "p_mistake": P_MISTAKE,
        "p_again": P_AGAIN,
    }
    if args.merge:
        results["states"] = merge_states(args.merge)
        results |= other_parts(args.merge)
        args.parts = []
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        os.environ["TEACHBACK_HOME"] = str(scratch / "home")  # the user's own store stays untouched
        if "replay" in args.parts:
            results["replay"] = timed(lambda: replay(scratch, args.seeds, args.sessions, args.lessons_tokens))
        if "embedded" in args.parts:
            sampling = {"max_steps": args.max_steps, "temperature": args.temperature}
            results["embedded"] = timed(lambda: embedded(scratch, args.embedded_seeds, args.embedded_tasks, sampling))
        if "states" in args.parts:
            sampling = {
                "max_steps": args.state_steps,
                "temperature": args.temperature,
                "max_tokens": args.max_tokens,
                "local_threads": args.threads,
            }
            results["states"] = timed(
                lambda: states_part(
                    scratch,
                    args.state_seeds,
                    args.state_tasks,
                    args.state_samples,
                    args.per_session,
                    sampling,
                    args.wordings,
                )
            )
        if "latency" in args.parts:
            results["latency"] = timed(lambda: latency(scratch, args.pairs, args.seeds[0]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    if args.json:
        summary = {k: v for k, v in results.items()}
        if "states" in summary:  # the samples themselves stay in --out
            summary["states"] = {k: v for k, v in summary["states"].items() if k != "rows"}
        print(json.dumps(summary, separators=(",", ":")))
    else:
        print(render(results))


def timed(work) -> dict[str, Any]:
    clock = time.perf_counter()
    out = work()
    out["wall_s"] = round(time.perf_counter() - clock, 1)
    return out


if __name__ == "__main__":
    main()
