"""More training data at a state than the K samples drawn there, each reply checked by running it at
the state (tasks.states.label_reply), so that a chosen reply is always one that succeeded:

- repaired: a failed reply whose call named a path that is not there (`not_found`,
  `outside_workspace`), with that path replaced in the model's own text by the nearest path that is;
- hinted: where no sample at a state succeeded, replies drawn with what went wrong in context (the
  self-distillation teacher's prompt), run at the state without it, and kept only where they
  succeed, as chosen replies for the student's prompt (which never held the hint);
- no-tool: at a session's first state with its instruction replaced by one of training's no-tool
  questions (tasks/no_tool_training.txt, disjoint from the held-out probes), `finish` or an answer
  chosen, a tool call rejected;
- forward: the state one step after a verified success (tasks.states.next_state: the success run,
  its results and edits in the conversation and the files), sampled and labelled like a recorded
  one (tasks.branches.forward_branches) - later states than the recording reached.

Each returns Branches marked with their source; tasks.branches builds records from them as from
sampled ones.
"""

from __future__ import annotations

import difflib
import json
import os
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tasks.probes import OVER_CALL
from tasks.states import DELETES, FINISHED, OK, PREMATURE, Label, Sampler, Scratch, State, label_reply

WRONG_PATH = frozenset({"not_found", "outside_workspace"})
SUCCESSES = frozenset({OK, FINISHED})
MAX_FILES = 5_000  # candidates for the nearest path; a workspace larger than this is cut there
HINT = (
    "An earlier reply at this point failed: {feedback} Reply again with one call that works, "
    "using only paths shown in the repository map or the instruction."
)


@dataclass(frozen=True)
class Branch:
    """One reply at a state, labelled by running it: what the model was given and what it wrote
    (sampled there, or from one of the sources below)."""

    seed: int
    label: Label
    prompt: list[dict[str, Any]] | None  # the text-mode messages exactly as the model was given them
    text: str  # the sampled completion, decoded from its token ids
    prompt_ids: list[int] | None = None
    completion_ids: list[int] | None = None
    ended: bool = True  # the model ended its turn (it did not stop at the token cap)
    source: str = "sampled"  # or repaired, hinted, no_tool, forward (tasks.sources)

    @property
    def success(self) -> bool:
        """A reply that ran (or finished with the tests passing), and deleted no file: a deletion ran
        too, but nothing at the state checks what it removed (the learning round's training data
        held 13 of 76 sft records that deleted a file, and every adapter then tried deletions twice
        as often as the base)."""
        return self.ended and self.label.kind in SUCCESSES and not DELETES.intersection(self.label.tools)

    @property
    def failure(self) -> bool:
        if not self.ended:  # whatever it was labelled (a call cut off mid-JSON reads as malformed)
            return False
        return self.label.kind in (PREMATURE, OVER_CALL) or self.label.call_error


def nearest_path(wrong: str, root: Path) -> str | None:
    """The existing file or folder under `root` (relative, posix) closest to `wrong`, or None."""
    candidates = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        base = Path(folder).relative_to(root)
        candidates += [(base / name).as_posix() for name in files + dirs]
        if len(candidates) >= MAX_FILES:
            break
    wanted = wrong.replace("\\", "/")
    for prefix in (str(root).replace("\\", "/") + "/", "./", "/"):
        wanted = wanted.removeprefix(prefix)
    if wanted in candidates:
        return None if wanted == wrong else wanted  # only the spelling was wrong (an absolute path)
    by_name = [c for c in candidates if Path(c).name == Path(wanted).name]
    if len(by_name) == 1:
        return by_name[0]
    found = difflib.get_close_matches(wanted, by_name or candidates, n=1, cutoff=0.6)
    return found[0] if found else None


async def repaired(state: State, failed: Branch, scratch: Scratch, task: Any, task_file: Path) -> Branch | None:
    """`failed` with its wrong path replaced by the nearest existing one, if that reply
    succeeds when run at the state; else None."""
    wrong = [target for _, kind, target in failed.label.failures if kind in WRONG_PATH and target]
    if not failed.ended or not wrong:
        return None
    right = nearest_path(wrong[0], scratch.root)
    quoted = json.dumps(wrong[0])[1:-1]  # as the path is spelled inside the reply's JSON
    if right is None or quoted not in failed.text:
        return None
    text = failed.text.replace(quoted, json.dumps(right)[1:-1])
    reply = reply_of(text, state)
    if reply is None:
        return None
    label = await _run(state, reply, scratch, task, task_file, "repair")
    if label.kind not in ("ok", "finished"):
        return None
    return replace(failed, label=label, text=text, completion_ids=None, source="repaired")


async def hinted(
    state: State, sampler: Sampler, feedback: str, seeds: range, scratch: Scratch, task: Any, task_file: Path, decode
) -> list[Branch]:
    """Replies drawn at `state` with `feedback` in context, labelled by running them at `state` as it
    was (without the hint); only those that succeeded, as Branches of the student's prompt."""
    hint = {"role": "user", "content": HINT.format(feedback=feedback)}
    teacher = replace(state, messages=[*state.messages, hint])
    found = []
    for seed in seeds:
        reply = await sampler.sample(teacher, seed)
        if reply.completion_tokens >= sampler.cap:
            continue
        label = await _run(state, reply, scratch, task, task_file, f"hint-{seed}")
        if label.kind in ("ok", "finished"):
            ids = reply.completion_token_ids
            found.append(
                Branch(
                    seed=seed,
                    label=label,
                    prompt=None,
                    text=text_of(reply, decode),
                    completion_ids=ids,
                    source="hinted",
                )
            )
    return found


async def no_tool(state: State, sampler: Sampler, samples: int, decode) -> list[Branch]:
    """K replies at a training no-tool question put in place of the first state's instruction:
    `finish` or an answer succeeds, any other call over-calls (tasks.probes.probe_label)."""
    from tasks.probes import TRAINING_QUESTIONS, build_probes, probe_label

    probes = build_probes([state], TRAINING_QUESTIONS)
    if not probes:
        return []
    found = []
    for seed in range(samples):
        reply = await sampler.sample(probes[0], seed)
        ids = reply.completion_token_ids
        found.append(
            Branch(
                seed=seed,
                label=probe_label(reply),
                prompt=reply.rendered_messages,
                text=text_of(reply, decode),
                prompt_ids=reply.prompt_token_ids,
                completion_ids=ids,
                ended=reply.completion_tokens < sampler.cap,
                source="no_tool",
            )
        )
    return found


def reply_of(text: str, state: State) -> Any | None:
    """What the model wrote at `state`, read back as the session reads a text-mode reply (the same
    message, the same call ids), or None when it holds no readable call."""
    from agent.model import ModelReply
    from agent.protocol.textcalls import parse_reply

    names = [t["function"]["name"] for t in state.tools]
    parsed = parse_reply(text, names, id_prefix=f"call_{len(state.messages)}")
    if parsed.error or not parsed.tool_calls:
        return None
    return ModelReply(message={"role": "assistant", "content": text or None, "tool_calls": parsed.tool_calls})


def text_of(reply: Any, decode) -> str:
    """What the model wrote: its sampled token ids decoded, or (a model that reports none) its calls in
    the text form the embedded model's prompt asks for, or its prose."""
    from agent.protocol.textcalls import render_call

    if reply.completion_token_ids is not None:
        return decode(reply.completion_token_ids)
    if reply.tool_calls:
        return "\n".join(render_call(call) for call in reply.tool_calls)
    return reply.message.get("content") or ""


async def _run(state: State, reply: Any, scratch: Scratch, task: Any, task_file: Path, name: str) -> Label:
    copy = scratch.copy(name)
    try:
        return await label_reply(state, reply, copy, task, task_file)
    finally:
        shutil.rmtree(copy.parent, ignore_errors=True)
