"""What `teachback demo` prints after its sessions: the errors, the pairs, one corrected pair as the
training record the export made from it, and the exact commands that open the demo's database."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common.text import one_line
from feedback_store import Store
from feedback_store.export.export import EmptyExport, export

SHOWN_PAIRS = 5
CLIPPED_CHARS = 160  # a string of the printed record longer than this is cut (the file holds it whole)


def report(
    demo_dir: Path,
    project: Path,
    db_path: Path,
    reasons: list[str],
    errors: Counter[str],
    store: Store,
    say: Callable[[str], None],
) -> int:
    """Print the run's outcome; 0 (the demo ran to the end, whatever the model did)."""
    pairs = store.pairs()
    say(f"\nTool errors: {_counts(errors) if errors else 'none'}")
    by_source = Counter(p.source for p in pairs)
    corrected = sum(1 for p in pairs if p.correction is not None)
    say(
        f"\nFeedback pairs recorded: {len(pairs)}"
        + (f" ({_counts(by_source)}; {corrected} with a correction)" if pairs else "")
    )
    for pair in pairs[:SHOWN_PAIRS]:
        fixed = "  → corrected" if pair.correction is not None else ""
        say(f"  [{pair.source}] {pair.tool or 'reply'}: {one_line(str(pair.feedback), 100)}{fixed}")
    command = command_name()
    export_path = demo_dir / "sdpo.jsonl"
    try:
        result = export([db_path], "sdpo", export_path)
    except EmptyExport:  # the model made no mistake this time: nothing to export
        exported = "(none: no feedback pairs this run)"
        say("\nNo sdpo export: this run recorded no feedback pairs.")
    else:
        exported = str(result.paths[0])
        say(f"\nExported {result.records} sdpo records to {', '.join(map(str, result.paths))}")
        if result.left_out:
            say("  left out: " + "; ".join(f"{n} {reason}" for reason, n in sorted(result.left_out.items())))
        _show_corrected_record(result.paths[0], command, say)
    db = shlex.quote(str(db_path))
    say(
        f"\nLook at:\n"
        f"  the project     {project}   (git diff shows what the model changed)\n"
        f"  the database    {db_path}\n"
        f"  the export      {exported}\n"
        f"  turn outcomes   {', '.join(reasons)}\n"
        f"\nThe demo keeps its own database, so a sample project never reaches the exports and lessons of\n"
        f"your own store. Open it with TEACHBACK_DB:\n"
        f"  TEACHBACK_DB={db} {command} stats\n"
        f"  TEACHBACK_DB={db} {command} export --format sdpo --out demo-sdpo.jsonl\n"
        f"  TEACHBACK_DB={db} {command} tui {shlex.quote(str(project))}\n"
        f"\nNext:\n"
        f"  {command} tui path/to/your/repo              the terminal app on your own code\n"
        f"  {command} doctor                             check git, the model, the database and the config\n"
        f"  in your editor: it starts `{command} lsp` or `{command} acp` itself; set-up in the README,\n"
        f'                  sections "In your editor" and "Agent panels"\n'
        f'  {command} run --model anthropic/claude-sonnet-4-5 --workspace path/to/your/repo "fix the failing test"\n'
        f"                                                 a hosted model (set ANTHROPIC_API_KEY first)"
    )
    return 0


def _show_corrected_record(path: Path, command: str, say: Callable[[str], None]) -> None:
    """Print the first exported record whose failure was corrected, in short."""
    with path.open(encoding="utf-8") as lines:
        found = next(
            (
                (number, record)
                for number, line in enumerate(lines, 1)
                if (record := json.loads(line)).get("correction")
            ),
            None,
        )
    if found is None:
        say(
            "\nNo pair was corrected this run: the model never followed a failed call with one that worked. "
            f"Another seed gives another run: TEACHBACK_SEED=1 {command} demo"
        )
        return
    number, record = found
    say(f"\nA mistake and what fixed it, as its training record ({path.name}, line {number}; shortened here):")
    say(f"  what the model did    {_call_text(record['completion'])}")
    say(f"  what the world said   {one_line(str(record['feedback']), 150)}")
    say(f"  what fixed it         {_call_text(record['correction'])}")
    say(json.dumps(_shortened(record), indent=2, ensure_ascii=False))


def _call_text(message: Any) -> str:
    """A recorded assistant message as `tool {arguments}`, or its text."""
    if not isinstance(message, dict):
        return one_line(str(message), 150)
    calls = message.get("tool_calls") or []
    if not calls:
        return one_line(str(message.get("content") or ""), 150)
    function = calls[0].get("function") or {}
    arguments = function.get("arguments")
    shown = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return one_line(f"{function.get('name')} {shown}", 150)


def _shortened(record: dict[str, Any]) -> dict[str, Any]:
    """The record with its conversation reduced to a count and its last message, and long texts cut:
    the prompt alone holds the system prompt and every tool's description."""
    shown: dict[str, Any] = {}
    for key, value in record.items():
        if key in ("prompt", "teacher_prompt") and isinstance(value, list) and value:
            shown[key] = [f"... {len(value) - 1} earlier messages ...", _clipped(value[-1])]
        elif key == "tools" and isinstance(value, list):
            shown[key] = f"... {len(value)} tool schemas ..."
        elif key == "rendered":
            shown[key] = "... the prompt as the model was given it ..."
        else:
            shown[key] = _clipped(value)
    return shown


def _clipped(value: Any) -> Any:
    if isinstance(value, str):
        return value if len(value) <= CLIPPED_CHARS else value[:CLIPPED_CHARS] + "..."
    if isinstance(value, dict):
        return {k: _clipped(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clipped(v) for v in value]
    return value


def _counts(counter: Counter[str]) -> str:
    return ", ".join(f"{name} {n}" for name, n in counter.most_common())


def command_name() -> str:
    """How to call teachback from here: its name when on PATH, else the path `make` installed."""
    if shutil.which("teachback"):
        return "teachback"
    script = Path(sys.argv[0])
    return str(script) if script.name == "teachback" else "teachback"
