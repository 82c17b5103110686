"""`teachback demo`: the whole loop offline, on a sample project, with the embedded model.

It copies the sample project that ships with the package (a small Python package whose test suite
has one failing test) into a fresh git repository, walks the embedded model through the fix in a
few short instructions in `full-auto` mode, records everything in the demo's own database, and then
shows what happened: the transcript (as `teachback run` shows it), the tool errors, the feedback
pairs, an `sdpo` export, and one corrected pair as the training record made from it.

The embedded model is tiny (135M parameters) and rarely finishes the fix; the mistakes it makes on
the way are the point. Its commonest one is to send the call it just made again: the loop guard
answers that with "Do not repeat it: use that result, make a different call, or, if the task is
done, call finish: {"name": "finish", ...}" (the call written out, which a small model copies), and
each instruction names its last step, `finish`, so the fix the guard's answer asks for is one the
model can make. When it does, the recorder links the repeat to the call that
followed it: a corrected pair, by the same rules as in any session. Local models run in the grammar
tool mode by default, because this model almost never writes a tool call in free text.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import TextIO

from agent.config import EMBEDDED_MODEL, ConfigError, Settings, load_settings
from agent.protocol import (
    Event,
    ToolCallFinished,
    TurnFinished,
    UserInput,
)
from cli.demo_report import report
from cli.transcript import Transcript
from feedback_store import Store, open_store

PROJECT_NAME = "textkit"
# Short, explicit instructions: a 135M model cannot plan a fix on its own. Each ends with `finish`,
# the way out that the loop guard's answer to a repeated call offers (see the module's docstring).
INSTRUCTIONS = (
    "Call read_file with path textkit/slug.py. Then call finish with summary `read`.",
    "slugify in textkit/slug.py must return a lowercase slug. Call edit_file on textkit/slug.py with "
    'old_text `"-".join(title.split())` and new_text `"-".join(title.lower().split())`. '
    "Then call finish with summary `edited`.",
    "Call run_command with command `python -m pytest -q` to run the tests. Then call finish with summary `tested`.",
)
TEST_COMMAND = (sys.executable, "-m", "pytest", "-q")
# Per instruction: room for a call, its repeat, the way out and a second try; the loop guard stops a
# model that sends one call a fourth time in a row sooner.
MAX_STEPS = 6
# The instructions' time, shared: each gets what is left divided by the instructions left, so the
# first (which also pays for importing litellm, loading the model and reading the whole prompt) may
# take more than a third, and the demo ends within five minutes however slow the machine. A safety
# net: steps and reply tokens end an instruction first on an idle machine.
DEMO_SECONDS = 270.0
# When no mistake was corrected, the instructions are given again, at most this many times, while
# this much of the demo's time is left: the loop the demo exists to show needs one corrected pair.
AGAIN_ROUNDS = 4
AGAIN_MIN_SECONDS = 20.0
REPLY_TOKENS = 256  # the embedded model rambles; a tool call is short
TEMPERATURE = 0.8  # at its low default the embedded model repeats one call until the step limit
DEFAULT_SEED = 0  # when the seed setting is unset: the same demo each time on a given machine
COMMAND_SECONDS = 60.0
GITIGNORE = "__pycache__/\n*.pyc\n.pytest_cache/\n"


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dest", type=Path, default=None, help="where to put the sample project (default: a temp dir)")
    parser.add_argument("--model", default=None, help="model to use instead of the embedded one")
    parser.add_argument("--max-steps", type=int, default=MAX_STEPS, help=f"per instruction (default {MAX_STEPS})")
    parser.add_argument(
        "--max-time",
        type=float,
        default=DEMO_SECONDS,
        metavar="SECONDS",
        help=f"for all the instructions together (default {DEMO_SECONDS:g}); each gets the time left divided "
        "by the instructions left, and one still running then is stopped, mid-reply if need be, and the demo says so",
    )
    parser.add_argument(
        "--learn",
        action="store_true",
        help="then one short learning round on the bundled task suite, and its before/after table (needs the train extra)",
    )


def demo_main(args: argparse.Namespace) -> int:
    dest = args.dest
    if args.learn and dest is None:  # the round's files go beside the demo's
        dest = Path(tempfile.mkdtemp(prefix="teachback-demo-"))
    code = run_demo(dest, model=args.model, max_steps=args.max_steps, max_time=args.max_time)
    if code or not args.learn:
        return code
    from trainer.demo_learn import run_learn

    return run_learn(dest)


def run_demo(
    dest: Path | None = None,
    *,
    model: str | None = None,
    max_steps: int = MAX_STEPS,
    max_time: float = DEMO_SECONDS,
    seed: int | None = None,
    out: TextIO = sys.stdout,
) -> int:
    """Run the demo in `dest` (default: a new temporary directory), recording into a feedback
    database there; 0 when it ran to the end. `seed` defaults to the seed setting (TEACHBACK_SEED)."""
    say = _Writer(out)
    model = model or EMBEDDED_MODEL
    problem = _missing_runtime(model)
    if problem:
        say(problem)
        return 1
    try:
        configured = load_settings()
        seed = _seed(seed, configured.seed)
        settings = Settings(
            model=model,
            approval="full-auto",
            max_steps=max_steps,
            max_time=max_time,
            command_timeout=COMMAND_SECONDS,
            repo_map_tokens=256,
            max_tokens=REPLY_TOKENS,
            temperature=TEMPERATURE,
            seed=seed,
            local_threads=configured.local_threads,
        ).replace()  # validated: --max-steps 0 or --max-time -1 is refused here, with the reason
        demo_dir = _demo_dir(dest)
        project = make_project(demo_dir / PROJECT_NAME)
    except ConfigError as exc:
        say(f"teachback demo: {exc}")
        return 2
    except (OSError, subprocess.CalledProcessError, ValueError) as exc:
        say(f"Could not set up the sample project: {exc}")
        return 1
    db_path = demo_dir / "feedback.db"
    settings = settings.replace(db=str(db_path))
    say(
        f"teachback demo: {model} works on {project} (full-auto, seed {seed}; at most {max_steps} steps "
        f"per instruction and {max_time:g} s for all {len(INSTRUCTIONS)}, --max-steps and --max-time).\n"
    )
    started = time.monotonic()
    transcript = _Transcript(say, Transcript(out))
    with open_store(db_path) as store:
        with _venv_on_path():
            finishes = asyncio.run(_run_sessions(project, settings, transcript, store))
            solved, test_output = check_tests(project)
        say(f"\nThe agent ran for {time.monotonic() - started:.0f} s.")
        if solved:
            say("Solved: yes, the sample project's tests pass now.")
        else:
            last_line = (test_output.strip().splitlines() or ["no output"])[-1]
            say(f"Solved: no, the sample project's tests still fail ({last_line}).")
        reasons = [f.reason for f in finishes]
        return report(demo_dir, project, db_path, reasons, transcript.errors, store, say)


def _seed(given: int | None, configured: int | None) -> int:
    """The run's sampling seed: the one given, else the seed setting, else DEFAULT_SEED."""
    if given is not None:
        return given
    return DEFAULT_SEED if configured is None else int(configured)


def make_project(root: Path) -> Path:
    """Copy the packaged sample project to `root` and commit it in a new git repository."""
    source = resources.files("agent").joinpath("sample_project")
    with resources.as_file(source) as path:
        shutil.copytree(path, root, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache"))
    (root / ".gitignore").write_text(GITIGNORE, encoding="utf-8")
    identity = ("-c", "user.name=teachback demo", "-c", "user.email=demo@teachback.invalid")
    for args in (("init", "-q", "-b", "main"), ("add", "-A"), (*identity, "commit", "-q", "-m", "Sample project")):
        subprocess.run(("git", *args), cwd=root, check=True, capture_output=True, text=True)
    return root


def check_tests(project: Path) -> tuple[bool, str]:
    """(passed, output) of the sample project's test suite."""
    try:
        done = subprocess.run(TEST_COMMAND, cwd=project, capture_output=True, text=True, timeout=COMMAND_SECONDS)
    except subprocess.TimeoutExpired:
        return False, f"the tests did not finish within {COMMAND_SECONDS:g} s"
    return done.returncode == 0, done.stdout + done.stderr


async def _run_sessions(project: Path, settings: Settings, transcript: _Transcript, store: Store) -> list[TurnFinished]:
    """One short session per instruction: in one long conversation the embedded model copies its
    own previous call over and over instead of reading the new instruction. When none of the model's
    mistakes was corrected, the instructions are given again, each in a new session and worded anew
    (one seed gives one reply per prompt), until one is or the rounds or the time run out."""
    finishes: list[TurnFinished] = []
    deadline = time.monotonic() + settings.max_time
    for number, text in enumerate(INSTRUCTIONS):
        # At least a second: an instruction whose share is gone still shows where it stopped.
        share = max((deadline - time.monotonic()) / (len(INSTRUCTIONS) - number), 1.0)
        finishes.append(await _run_instruction(project, settings, share, text, transcript, store))
    for again in range(AGAIN_ROUNDS):
        left = deadline - time.monotonic()
        if left < AGAIN_MIN_SECONDS or any(pair.correction is not None for pair in store.pairs()):
            break
        if again == 0:
            transcript.say(
                "\n(The model corrected none of its mistakes: the demo asks again, each time in a new session.)"
            )
        text = f"Once more: {INSTRUCTIONS[again % len(INSTRUCTIONS)]}"
        finishes.append(await _run_instruction(project, settings, left, text, transcript, store))
    return finishes


async def _run_instruction(
    project: Path, settings: Settings, seconds: float, text: str, transcript: _Transcript, store: Store
) -> TurnFinished:
    """`text` as the first and only turn of a new, recorded session of at most `seconds`."""
    from host.session import IfNoStore, open_recorded

    hosted = open_recorded(
        project,
        settings.replace(max_time=seconds),
        frontend="demo",
        if_no_store=IfNoStore.REFUSE,  # the demo's own store, opened already
        store=store,
        lessons=False,
        warn=lambda message: print(f"teachback demo: {message}", file=sys.stderr),
    )
    session = hosted.session
    session.subscribe(transcript)
    transcript.say(f"\nyou> {text}")
    try:
        finished = await session.run(UserInput(text=text))
        if finished.reason == "max_time":
            transcript.say(
                f"  (stopped: this instruction's share of the demo's {settings.max_time:g} s, --max-time, "
                f"was {seconds:.0f} s; the model was still working, so its last reply may be cut short)"
            )
        return finished
    finally:
        await session.close()
        if unrecorded := hosted.close():
            transcript.say(f"  ({len(unrecorded)} event(s) of this session could not be recorded)")


class _Transcript:
    """The CLI's transcript of each session, and a count of its failed tool calls by tool and kind."""

    def __init__(self, say: _Writer, show: Transcript) -> None:
        self.say = say
        self.show = show
        self.errors: Counter[str] = Counter()

    def __call__(self, event: Event) -> None:
        self.show(event)
        if isinstance(event, ToolCallFinished) and not event.ok:
            self.errors[f"{event.name or '(unreadable reply)'}: {event.error_kind}"] += 1


def _missing_runtime(model: str) -> str | None:
    if not model.startswith("local/"):
        return None
    from agent.providers.llama_engine import LocalModelError, check_runtime

    try:
        check_runtime(model.removeprefix("local/"))
    except LocalModelError as exc:
        return str(exc)
    return None


def _demo_dir(dest: Path | None) -> Path:
    if dest is None:
        return Path(tempfile.mkdtemp(prefix="teachback-demo-"))
    dest = dest.expanduser().resolve()
    if dest.exists() and any(dest.iterdir()):
        raise ValueError(f"{dest} is not empty; pass a new or empty directory with --dest")
    dest.mkdir(parents=True, exist_ok=True)
    return dest


@contextlib.contextmanager
def _venv_on_path() -> Iterator[None]:
    """Commands the model runs (`python -m pytest`) find this interpreter, with pytest, first."""
    before = os.environ.get("PATH", "")
    os.environ["PATH"] = os.pathsep.join((str(Path(sys.executable).parent), before))
    try:
        yield
    finally:
        os.environ["PATH"] = before


class _Writer:
    def __init__(self, out: TextIO) -> None:
        self.out = out

    def __call__(self, text: str) -> None:
        print(text, file=self.out, flush=True)
