"""A call a hook blocked, then one it let through: a `hook` pair whose correction is the call that
worked, in every export format; a rewritten call is recorded as sent and as run."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from feedback_store import open_store
from feedback_store.export.export import FORMATS, export
from tests.agent.hooks_helpers import hook_script, run_session, toml_hooks
from tests.conftest import call, turn

pytestmark = pytest.mark.timeout(400)  # every export format, on a busy machine

WITHOUT_FEEDBACK = ("dpo", "sft", "kto")  # the failed and the fixed call (or the fix alone): no feedback text
NO_FETCH = """
if "fetch" in event["tool_input"]["command"]:
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                      "permissionDecisionReason": "no fetching here: copy the library from util.py"}}))
"""


async def test_a_blocked_call_and_the_next_that_worked_are_a_hook_pair_in_every_format(
    git_repo, script, teachback_home, tmp_path
):
    toml_hooks(
        teachback_home / "teachback.toml", "PreToolUse", "Bash|run_command", hook_script(tmp_path, "h", NO_FETCH)
    )
    db = tmp_path / "feedback.db"
    blocked = call("run_command", {"command": "sh fetch-lib.sh lib.py"}, "c1")
    worked = call("run_command", {"command": "cp util.py lib.py"}, "c2")
    ran = await run_session(git_repo, script(turn(blocked), turn(worked)), db=db)
    assert ran.finished.reason == "answered" and (git_repo / "lib.py").exists()
    store = open_store(db)
    [pair] = store.pairs()
    store.close()
    assert (pair.source, pair.error_kind, pair.tool) == ("hook", "denied", "run_command")
    assert "no fetching here: copy the library from util.py" in pair.feedback
    for fmt in sorted(FORMATS):
        out = tmp_path / (f"{fmt}.parquet" if FORMATS[fmt].parquet else f"{fmt}.jsonl")
        export([db], fmt, out)
        rows = pq.read_table(out).to_pylist() if FORMATS[fmt].parquet else [json.loads(x) for x in out.open()]
        records = json.dumps([r for r in rows if "-hook" in json.dumps(r)])  # the pair's id names its source
        assert records != "[]", fmt
        assert "cp util.py lib.py" in records, fmt  # the correction: the call that worked
        if fmt not in WITHOUT_FEEDBACK:
            assert "no fetching here: copy the library" in records, fmt
    sdpo = [json.loads(x) for x in (tmp_path / "sdpo.jsonl").open()]
    [record] = sdpo
    assert record["source"] == "hook"
    assert json.loads(json.dumps(record["correction"]["tool_calls"][0]["function"]["arguments"])) == {
        "command": "cp util.py lib.py"
    }


async def test_a_rewrite_is_recorded_as_sent_and_as_run(git_repo, script, teachback_home, tmp_path):
    rewrite = hook_script(
        tmp_path,
        "r",
        'print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", '
        '"updatedInput": {"command": "echo run > out.txt"}}}))',
    )
    toml_hooks(teachback_home / "teachback.toml", "PreToolUse", "run_command", rewrite)
    db = tmp_path / "feedback.db"
    await run_session(git_repo, script(turn(call("run_command", {"command": "echo sent > out.txt"}, "c1"))), db=db)
    store = open_store(db)
    [sent] = store.query("SELECT arguments FROM tool_calls")
    [ran] = store.query("SELECT json FROM events WHERE type = 'hook_ran'")
    store.close()
    assert json.loads(sent["arguments"]) == {"command": "echo sent > out.txt"}
    assert json.loads(ran["json"])["updated_input"] == {"command": "echo run > out.txt"}
    assert (git_repo / "out.txt").read_text().strip() == "run"
