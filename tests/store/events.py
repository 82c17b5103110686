"""Hand-made event logs: a session as the agent would emit it, without running a model."""

from __future__ import annotations

import json
from typing import Any

from agent.protocol import (
    ApprovalRequested,
    ApprovalResolved,
    AssistantMessage,
    EditApplied,
    EditReviewed,
    Event,
    ModelUsage,
    SessionStarted,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    TurnStarted,
    new_id,
)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name} tool",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
    for name in ("read_file", "edit_file", "create_file", "delete_file", "run_command", "finish")
]


class FakeSession:
    """Builds the event log of one session, step by step."""

    def __init__(
        self, model: str = "openai/gpt-test", session_id: str | None = None, ts: float = 1_750_000_000.0
    ) -> None:
        self.id = session_id or new_id()
        self.model = model
        self.events: list[Event] = []
        self.ts = ts
        self.turn_no = 0
        self.step_no = 0

    def _add(self, event: Event) -> Event:
        self.events.append(event)
        return event

    def _when(self) -> float:
        self.ts += 1.0
        return self.ts

    def start(
        self, system: str = "You are a careful coding agent.", tools: list | None = None, workspace: str = "/work/proj"
    ) -> FakeSession:
        self._add(
            SessionStarted(
                session_id=self.id,
                ts=self._when(),
                workspace=workspace,
                model=self.model,
                frontend="test",
                system_prompt=system,
                tools=TOOLS if tools is None else tools,
                git_head="abc123",
                config={"approval": "ask"},
            )
        )
        return self

    def user(self, text: str) -> FakeSession:
        self.turn_no += 1
        self._add(
            TurnStarted(
                session_id=self.id,
                ts=self._when(),
                turn=self.turn_no,
                text=text,
                message={"role": "user", "content": text},
            )
        )
        return self

    def usage(self, cause_id: str, **fields: Any) -> Event:
        """The model call behind the event `cause_id`, at this step, with `fields` (tokens, cost, ...)."""
        return self._add(
            ModelUsage(
                session_id=self.id, ts=self._when(), cause_id=cause_id, model=self.model, step=self.step_no, **fields
            )
        )

    def say(self, content: str) -> FakeSession:
        self.step_no += 1
        self._add(
            AssistantMessage(
                session_id=self.id,
                ts=self._when(),
                step=self.step_no,
                message={"role": "assistant", "content": content},
            )
        )
        return self

    def call(
        self,
        name: str,
        arguments: dict | str,
        *,
        ok: bool = True,
        result: str = "done",
        error_kind: str | None = None,
        target: str | None = None,
        edits: list[dict[str, Any]] = (),
        denied_by_user: str | None = None,
        exit_code: int | None = None,
    ) -> str:
        """One assistant message with one tool call, and what the tool did. Returns the call id."""
        self.step_no += 1
        call_id = f"call_{self.step_no}"
        raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
        said = self._add(
            AssistantMessage(
                session_id=self.id,
                ts=self._when(),
                step=self.step_no,
                message={
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": raw}}],
                },
            )
        )
        self.usage(
            said.id,
            prompt_tokens=100,
            completion_tokens=20,
            cost_usd=0.001,
            latency_ms=250.0,
            logprobs=[{"token": "x", "logprob": -0.1}],
        )
        started = self._add(
            ToolCallStarted(
                session_id=self.id, ts=self._when(), call_id=call_id, name=name, arguments=raw, step=self.step_no
            )
        )
        if denied_by_user is not None:
            request = new_id()
            self._add(
                ApprovalRequested(
                    session_id=self.id,
                    ts=self._when(),
                    request_id=request,
                    call_id=call_id,
                    action="command",
                    summary="run",
                    detail=raw,
                )
            )
            self._add(
                ApprovalResolved(
                    session_id=self.id,
                    ts=self._when(),
                    request_id=request,
                    call_id=call_id,
                    approved=False,
                    comment=denied_by_user,
                )
            )
        for edit in edits:
            self._add(
                EditApplied(
                    session_id=self.id,
                    ts=self._when(),
                    cause_id=started.id,
                    call_id=call_id,
                    edit_id=edit.get("edit_id", new_id()),
                    path=edit["path"],
                    kind=edit.get("kind", "modify"),
                    before=edit.get("before"),
                    after=edit.get("after"),
                    diff=edit.get("diff", ""),
                    new_path=edit.get("new_path"),
                    syntax_error=edit.get("syntax_error"),
                )
            )
        message = {"role": "tool", "tool_call_id": call_id, "content": result}
        self._add(
            ToolCallFinished(
                session_id=self.id,
                ts=self._when(),
                cause_id=started.id,
                call_id=call_id,
                name=name,
                ok=ok,
                result=result,
                step=self.step_no,
                error_kind=error_kind,
                target=target,
                duration_ms=3.0,
                message=message,
                exit_code=exit_code,
            )
        )
        return call_id

    def review(
        self, edit_id: str, path: str, decision: str, comment: str | None = None, user_content: str | None = None
    ) -> FakeSession:
        self._add(
            EditReviewed(
                session_id=self.id,
                ts=self._when(),
                edit_id=edit_id,
                path=path,
                decision=decision,
                comment=comment,
                user_content=user_content,
            )
        )
        return self

    def finish(self) -> FakeSession:
        self._add(
            TurnFinished(
                session_id=self.id,
                ts=self._when(),
                turn=self.turn_no,
                reason="finished",
                steps=self.step_no,
                prompt_tokens=100,
                completion_tokens=20,
                cost_usd=0.001,
            )
        )
        return self


def edit(path: str, before: str, after: str, **extra: Any) -> dict[str, Any]:
    return {
        "path": path,
        "before": before,
        "after": after,
        "diff": "".join(f"-{line}\n" for line in before.splitlines())
        + "".join(f"+{line}\n" for line in after.splitlines()),
        **extra,
    }


def mixed_session(
    model: str = "openai/gpt-test",
    session_id: str | None = None,
    task: str = "Fix the greeting and make the tests pass",
) -> FakeSession:
    """A session with one failure of every automatic kind, each followed by its fix."""
    s = FakeSession(model=model, session_id=session_id).start().user(task)
    s.call(
        "edit_file",
        {"path": "app.py", "old_text": "Hi"},
        ok=False,
        error_kind="no_match",
        target="app.py",
        result="old_text was not found in app.py. Closest: 'Hello'",
    )
    s.call(
        "edit_file",
        {"path": "app.py", "old_text": "Hello"},
        target="app.py",
        edits=[edit("app.py", "print('Hello')\n", "print('Hello!')\n")],
    )
    s.call(
        "open_file",
        {"path": "app.py"},
        ok=False,
        error_kind="unknown_tool",
        result="There is no tool named open_file. Available tools: read_file, edit_file, run_command, finish.",
    )
    s.call("read_file", {"path": "app.py"}, target="app.py", result="print('Hello!')\n")
    s.call(
        "run_command",
        {"command": "pytest -q"},
        ok=False,
        error_kind="exit_status",
        target="pytest -q",
        result="FAILED tests/test_app.py::test_greet - AssertionError: 'Hello!' != 'Hello, world'",
    )
    s.call(
        "edit_file",
        {"path": "app.py", "old_text": "Hello!"},
        target="app.py",
        edits=[
            edit("app.py", "print('Hello!')\n", "print('Hello, world'\n", syntax_error="app.py:1: '(' was never closed")
        ],
        result="Edited app.py.\nThe edit was applied, but the file no longer parses:\napp.py:1: '(' was never closed",
    )
    s.call(
        "edit_file",
        {"path": "app.py", "old_text": "world'"},
        target="app.py",
        edits=[edit("app.py", "print('Hello, world'\n", "print('Hello, world')\n")],
    )
    s.call("run_command", {"command": "pytest -q"}, target="pytest -q", result="1 passed")
    s.call("finish", {"summary": "done"}, result="Finished.")
    return s.finish()


def with_altered_edit(**changes: Any) -> tuple[list[Event], Event]:
    """A session with one edit, a copy of that edit with `changes` right after it, then the rest of
    the session: (its events, the altered copy)."""
    import dataclasses

    fake = FakeSession().start().user("edit")
    fake.call("edit_file", {"path": "a.py"}, edits=[{"path": "a.py", "before": "a", "after": "b"}])
    edit = next(e for e in fake.events if isinstance(e, EditApplied))
    altered = dataclasses.replace(edit, **changes)
    events = [*fake.events, altered]
    fake.call("read_file", {"path": "missing.py"}, ok=False, error_kind="not_found", target="missing.py")
    return events + fake.finish().events[len(events) - 1 :], altered
