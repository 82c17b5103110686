"""A record's JSON line, exactly as `json.dumps(record, ensure_ascii=False)` writes it, put
together from pieces: the records of a session share their messages and tool schemas (a prompt is
the next pair's prompt prefix, `teacher_prompt` repeats it), so each shared dict is encoded once
per session and its text spliced into every record that holds it.

json.dumps writes a dict as `{` + `"key": value` items joined by `, ` + `}` and a list as `[` +
items joined by `, ` + `]`, each value written as it would be alone, so the spliced text is the
same text.
"""

from __future__ import annotations

from typing import Any

from common.jsontext import dumps_with
from feedback_store.export.views import Memo

dumps = dumps_with(ensure_ascii=False)  # json.dumps(value, ensure_ascii=False)


def record_line(record: dict[str, Any], memo: Memo) -> str:
    """`json.dumps(record, ensure_ascii=False)`: the dicts and the lists of dicts among its values
    from `memo`, its other values encoded together a run of keys at a time."""
    parts: list[str] = []
    run: dict[str, Any] = {}
    for key, value in record.items():
        if not isinstance(key, str):  # json.dumps writes such a key as a string: leave it to it
            run[key] = value
            continue
        if isinstance(value, dict):
            text = memo.get(value, dumps)
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            text = "[" + ", ".join([memo.get(v, dumps) for v in value]) + "]"
        else:
            run[key] = value
            continue
        if run:
            parts.append(dumps(run)[1:-1])
            run = {}
        parts.append(f"{dumps(key)}: {text}")
    if run:
        parts.append(dumps(run)[1:-1])
    return "{" + ", ".join(parts) + "}"
