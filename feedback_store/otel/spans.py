"""A recorded session as OpenTelemetry GenAI spans, planned from its events and its feedback without
importing OpenTelemetry (otel/send.py turns the plans into spans).

One trace per turn, under the GenAI semantic conventions: `invoke_agent teachback` (the turn) is the
root, and under it `chat {model}` for each model call and `execute_tool {tool}` for each tool call;
`gen_ai.conversation.id` is the session id. Feedback is a `gen_ai.evaluation.result` event on the
execute_tool span of the call it judges: each feedback pair (`fail`, the feedback as explanation),
each approval decision and each review of an edit (`pass` or `fail`, the user's comment).

Messages, arguments and results travel only when `content` is on, redacted as exports are. With it
off, the feedback still travels, but every argument value of the judged call that it quotes is
masked, so no prompt or argument text leaves the machine.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from feedback_store.otel.content import Content, mask, message_parts

AGENT_NAME = "teachback"
EVALUATION_EVENT = "gen_ai.evaluation.result"
OWN_PROVIDERS = frozenset({"local", "scripted"})  # model strings of teachback's own providers


@dataclass
class Verdict:
    """One gen_ai.evaluation.result: `call_id` names the call it judges."""

    call_id: str | None
    name: str
    label: str  # pass | fail
    explanation: str | None
    ts: float
    attributes: dict[str, Any] = field(default_factory=dict)
    event_id: str | None = None  # the event it was recorded at, for one that judges no call

    def event_attributes(self) -> dict[str, Any]:
        found = {
            "gen_ai.evaluation.name": self.name,
            "gen_ai.evaluation.score.label": self.label,
            "gen_ai.evaluation.score.value": 1.0 if self.label == "pass" else 0.0,
            **self.attributes,
        }
        if self.explanation:
            found["gen_ai.evaluation.explanation"] = self.explanation
        return found


@dataclass
class SpanPlan:
    key: str  # unique within the session
    parent: str | None  # the parent's key; None for a turn, the root of its trace
    name: str
    kind: str  # internal | client
    start: float  # seconds since the epoch
    end: float
    attributes: dict[str, Any]
    error: str | None = None  # the span's status is ERROR with this description
    verdicts: list[Verdict] = field(default_factory=list)


@dataclass
class Plan:
    spans: list[SpanPlan]
    # Verdicts on calls whose span is not in `spans` (a review that came after its turn was sent).
    loose: list[Verdict]


@dataclass(frozen=True)
class FeedbackRow:
    """A feedback pair as the store holds it (feedback_store.otel.export reads them)."""

    id: str
    source: str
    feedback: str
    failure_event_id: str | None
    error_kind: str | None = None
    corrected: bool = False
    created_at: float = 0.0


def plan_session(events: Sequence[dict[str, Any]], pairs: Iterable[FeedbackRow], content: Content) -> Plan:
    """The spans of `events` (one session's, in recorded order; a run of whole turns), with the
    feedback of `pairs` and of the approvals and reviews among the events."""
    builder = _Builder(content)
    for event in events:
        builder.add(event)
    builder.close_turn(None)
    verdicts = builder.verdicts + [_pair_verdict(p, builder, content) for p in pairs]
    spans = {plan.key: plan for plan in builder.spans}
    loose = []
    for verdict in verdicts:
        target = spans.get(f"tool:{verdict.call_id}") if verdict.call_id else None
        if target is None and verdict.call_id is None:  # no call (an interrupted reply): on its turn
            target = builder.event_turns.get(verdict.event_id or "") or (builder.turns[-1] if builder.turns else None)
        if target is None:
            loose.append(verdict)
        else:
            target.verdicts.append(verdict)
    for plan in builder.spans:
        plan.verdicts.sort(key=lambda v: v.ts)
    return Plan(builder.spans, loose)


class _Builder:
    def __init__(self, content: Content) -> None:
        self.content = content
        self.spans: list[SpanPlan] = []
        self.turns: list[SpanPlan] = []
        self.verdicts: list[Verdict] = []
        self.session: dict[str, Any] = {}
        self.session_id = ""
        self.model = ""
        self.turn: SpanPlan | None = None
        self.chats: dict[int, SpanPlan] = {}  # this turn's model calls, by step
        self.replies: dict[int, dict[str, Any]] = {}  # this turn's replies whose call has no span yet
        self.calls: dict[str, SpanPlan] = {}
        self.arguments: dict[str, Any] = {}  # call id -> the arguments it was sent with
        self.event_calls: dict[str, str] = {}  # event id -> the call it belongs to
        self.edit_calls: dict[str, str] = {}  # edit id -> the call that made it
        self.event_turns: dict[str, SpanPlan] = {}  # event id -> the turn it came in
        self.last_ts = 0.0

    def add(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        self.last_ts = max(self.last_ts, float(event.get("ts") or 0.0))
        self.session_id = self.session_id or str(event.get("session_id") or "")
        if self.turn is not None:
            self.event_turns[str(event.get("id"))] = self.turn
        if kind == "session_started":
            self.session = event
            self.model = str(event.get("model") or "")
        elif kind == "turn_started":
            self.close_turn(None)
            self._open_turn(event)
        elif kind == "turn_finished":
            self.close_turn(event)
        elif kind == "model_usage" and self.turn is not None:
            self._chat(event)
        elif kind == "assistant_message" and self.turn is not None:
            self._reply(event)
        elif kind == "tool_call_started":
            self._call_started(event)
        elif kind == "tool_call_finished":
            self._call_finished(event)
        elif kind == "edit_applied":
            self.edit_calls[event["edit_id"]] = event["call_id"]
            self.event_calls[event["id"]] = event["call_id"]
        elif kind == "approval_resolved":
            self._approval(event)
        elif kind == "edit_reviewed":
            self._review(event)

    def _common(self) -> dict[str, Any]:
        return {
            "gen_ai.conversation.id": self.session_id,
            "gen_ai.agent.name": AGENT_NAME,
        }

    def _open_turn(self, event: dict[str, Any]) -> None:
        attributes = {
            **self._common(),
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.request.model": self.model,
            "gen_ai.provider.name": provider(self.model),
            "teachback.turn": int(event.get("turn") or 0),
        }
        if self.session.get("frontend"):
            attributes["teachback.frontend"] = self.session["frontend"]
        if self.content.on:
            attributes["gen_ai.input.messages"] = self.content.json([message_parts(event.get("message"), "user")])
            if self.session.get("system_prompt"):
                attributes["gen_ai.system_instructions"] = self.content.json(
                    [{"type": "text", "content": self.session["system_prompt"]}]
                )
        self.turn = SpanPlan(
            key=f"turn:{event['id']}",
            parent=None,
            name=f"invoke_agent {AGENT_NAME}",
            kind="internal",
            start=float(event["ts"]),
            end=float(event["ts"]),
            attributes=attributes,
        )
        self.spans.append(self.turn)
        self.turns.append(self.turn)
        self.chats, self.replies = {}, {}

    def close_turn(self, finished: dict[str, Any] | None) -> None:
        turn, self.turn = self.turn, None
        if turn is None:
            return
        turn.end = float(finished["ts"]) if finished else max(turn.start, self.last_ts)
        if finished is None:
            turn.attributes["teachback.turn.reason"] = "unfinished"
            return
        turn.attributes.update(
            {
                "teachback.turn.reason": finished.get("reason") or "",
                "teachback.turn.steps": int(finished.get("steps") or 0),
                "gen_ai.usage.input_tokens": int(finished.get("prompt_tokens") or 0),
                "gen_ai.usage.output_tokens": int(finished.get("completion_tokens") or 0),
                "teachback.cost_usd": float(finished.get("cost_usd") or 0.0),
            }
        )
        if finished.get("reason") == "error":
            turn.error = "error"
        if self.content.on and finished.get("summary"):
            turn.attributes["gen_ai.output.messages"] = self.content.json(
                [{"role": "assistant", "parts": [{"type": "text", "content": finished["summary"]}]}]
            )

    def _chat(self, event: dict[str, Any]) -> None:
        assert self.turn is not None
        end = float(event["ts"])
        model = str(event.get("model") or self.model)
        plan = SpanPlan(
            key=f"chat:{event['id']}",
            parent=self.turn.key,
            name=f"chat {model}",
            kind="client",
            start=max(self.turn.start, end - float(event.get("latency_ms") or 0.0) / 1000),
            end=end,
            attributes={
                **self._common(),
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": model,
                "gen_ai.provider.name": provider(model),
                "gen_ai.usage.input_tokens": int(event.get("prompt_tokens") or 0),
                "gen_ai.usage.output_tokens": int(event.get("completion_tokens") or 0),
                "teachback.step": int(event.get("step") or 0),
            },
        )
        self.spans.append(plan)
        step = int(event.get("step") or 0)
        self.chats[step] = plan
        if step in self.replies:
            self._answered(plan, self.replies.pop(step))

    def _reply(self, event: dict[str, Any]) -> None:
        """The model's reply comes before its usage: kept until that call's span exists."""
        step = int(event.get("step") or 0)
        message = event.get("message") if isinstance(event.get("message"), dict) else {}
        if step in self.chats:
            self._answered(self.chats[step], message)
        else:
            self.replies[step] = message

    def _answered(self, plan: SpanPlan, message: dict[str, Any]) -> None:
        plan.attributes["gen_ai.response.finish_reasons"] = ["tool_calls" if message.get("tool_calls") else "stop"]
        if self.content.on:
            plan.attributes["gen_ai.output.messages"] = self.content.json([message_parts(message, "assistant")])

    def _call_started(self, event: dict[str, Any]) -> None:
        call_id, name = str(event["call_id"]), str(event.get("name") or "")
        self.arguments[call_id] = event.get("args") if event.get("args") is not None else event.get("arguments")
        self.event_calls[event["id"]] = call_id
        if self.turn is None:  # a call named only so that a later verdict on it knows its arguments
            return
        attributes = {
            **self._common(),
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "extension" if name.startswith("mcp__") else "function",
        }
        if self.content.on:
            attributes["gen_ai.tool.call.arguments"] = self.content.text(str(event.get("arguments") or ""))
        plan = SpanPlan(
            key=f"tool:{call_id}",
            parent=self.turn.key,
            name=f"execute_tool {name}",
            kind="internal",
            start=float(event["ts"]),
            end=float(event["ts"]),
            attributes=attributes,
        )
        self.spans.append(plan)
        self.calls[call_id] = plan

    def _call_finished(self, event: dict[str, Any]) -> None:
        call_id = str(event["call_id"])
        self.event_calls[event["id"]] = call_id
        plan = self.calls.get(call_id)
        if plan is None:
            return
        plan.end = max(plan.start, float(event["ts"]))
        if not event.get("ok"):
            plan.error = str(event.get("error_kind") or "failed")
            plan.attributes["error.type"] = plan.error
        if event.get("exit_code") is not None:
            plan.attributes["process.exit.code"] = int(event["exit_code"])
        if self.content.on:
            plan.attributes["gen_ai.tool.call.result"] = self.content.text(str(event.get("result") or ""))

    def _approval(self, event: dict[str, Any]) -> None:
        call_id = str(event["call_id"])
        self.event_calls[event["id"]] = call_id
        approved = bool(event.get("approved"))
        comment = event.get("comment") or ("" if approved else "The user denied this call.")
        self.verdicts.append(
            Verdict(call_id, "teachback.approval", "pass" if approved else "fail", self.explain(comment), event["ts"])
        )

    def _review(self, event: dict[str, Any]) -> None:
        call_id = self.edit_calls.get(event.get("edit_id") or "")
        if call_id is not None:
            self.event_calls[event["id"]] = call_id
        decision = str(event.get("decision") or "")
        comment = event.get("comment") or f"The user {decision} this edit."
        self.verdicts.append(
            Verdict(
                call_id,
                "teachback.review",
                "pass" if decision == "accepted" else "fail",
                self.explain(comment),
                event["ts"],
                {"teachback.review.decision": decision},
            )
        )

    def explain(self, text: str, call_id: str | None = None) -> str:
        """Feedback for the explanation: redacted, and with content off, the judged call's argument
        values masked."""
        if not self.content.on and call_id is not None:
            text = mask(text, self.arguments.get(call_id))
        return self.content.text(text)


def _pair_verdict(pair: FeedbackRow, builder: _Builder, content: Content) -> Verdict:
    call_id = builder.event_calls.get(pair.failure_event_id or "")
    attributes: dict[str, Any] = {
        "teachback.pair.id": pair.id,
        "teachback.pair.source": pair.source,
        "teachback.pair.corrected": pair.corrected,
    }
    if pair.error_kind:
        attributes["error.type"] = pair.error_kind
    return Verdict(
        call_id,
        f"teachback.{pair.source}",
        "fail",
        builder.explain(pair.feedback, call_id),
        pair.created_at,
        attributes,
        pair.failure_event_id,
    )


def provider(model: str) -> str:
    """gen_ai.provider.name: litellm's provider prefix of the model string (teachback's own providers
    are `teachback`)."""
    prefix = model.split("/", 1)[0] if "/" in model else "openai"
    return AGENT_NAME if prefix in OWN_PROVIDERS else prefix
