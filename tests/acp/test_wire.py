"""The checks on each line from the editor, as a pure function: what is handed to the protocol
library, what is answered instead, and what is only logged."""

from __future__ import annotations

import json

from acp_server.wire import INTERNAL_ERROR, Deliver, Drop, Refuse, classify


def _line(message: object) -> bytes:
    return json.dumps(message).encode()


def test_a_request_loses_only_its_params_meta_which_the_library_would_spread_over_the_arguments() -> None:
    message = {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/p", "_meta": {"cwd": 5}}}
    verdict = classify(_line(message))
    assert isinstance(verdict, Deliver)
    assert verdict.message == {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/p"}}


def test_only_a_well_formed_cancel_is_taken_as_a_notification() -> None:
    cancel = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s"}}
    assert isinstance(classify(_line(cancel)), Deliver)
    for bent in [
        {**cancel, "params": {"sessionId": 5}},
        {**cancel, "params": [1]},
        {**cancel, "method": "session/new"},
    ]:
        verdict = classify(_line(bent))
        assert isinstance(verdict, Drop) and verdict.reason


def test_a_malformed_answer_from_the_editor_fails_the_request_it_answers() -> None:
    for error in ["bad", {"code": "1", "message": "m"}, {"code": 1}, [1]]:
        verdict = classify(_line({"jsonrpc": "2.0", "id": 3, "error": error}))
        assert isinstance(verdict, Deliver)
        assert verdict.message["id"] == 3 and verdict.message["error"]["code"] == INTERNAL_ERROR
        assert "the editor's answer was malformed" in verdict.message["error"]["message"]
    good = {"jsonrpc": "2.0", "id": 3, "result": {"content": "text"}}
    assert classify(_line(good)) == Deliver(good)


def test_an_answer_to_no_request_of_the_agent_is_dropped() -> None:
    for msg_id in [[1], {"a": 1}, True, 1.5, "1", None]:
        assert isinstance(classify(_line({"jsonrpc": "2.0", "id": msg_id, "result": {}})), Drop)


def test_the_id_of_a_message_too_deep_to_parse_is_found_before_or_after_the_depths() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    cases = [
        ('{"jsonrpc": "2.0", "id": {"k": [1, 2]}, "method": "m", "params": DEEP}', {"k": [1, 2]}),
        ('{"jsonrpc": "2.0", "method": "m", "params": {"x": "\\"id\\": 9", "y": DEEP}, "id": "late"}', "late"),
        ('{"jsonrpc": "2.0", "method": "m", "params": DEEP}', None),  # none to find
        ('{"params": DEEP, "id": ' + "[" * 5000 + "]" * 5000 + "}", None),  # an id too deep itself
    ]
    for text, msg_id in cases:
        verdict = classify(text.replace("DEEP", deep).encode())
        assert isinstance(verdict, Refuse) and verdict.answer["error"]["code"] == -32600
        assert verdict.answer["id"] == msg_id


def test_numbers_json_cannot_carry_are_refused_as_not_json() -> None:
    for text in [b'{"id": NaN}', b'{"id": Infinity}', b'{"id": 1e400}', b'{"id": ' + b"9" * 5000 + b"}"]:
        verdict = classify(text)
        assert (
            isinstance(verdict, Refuse) and verdict.answer["error"]["code"] == -32700 and verdict.answer["id"] is None
        )
