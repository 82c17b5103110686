"""A record's JSON line, exactly as `json.dumps(record, ensure_ascii=False)` writes it, put
together from pieces: the records of a session share their messages and tool schemas (a prompt is
the next pair's prompt prefix, `teacher_prompt` repeats it), so each shared dict is encoded once
per session and its text spliced into every record that holds it.

json.dumps writes a dict as `{` + `"key": value` items joined by `, ` + `}` and a list as `[` +
items joined by `, ` + `]`, each value written as it would be alone, so the spliced text is the
same text.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from common.jsontext import dumps_unicode as dumps
from feedback_store.export.views import Memo


def record_line(record: dict[str, Any], memo: Memo) -> str:
    """`json.dumps(record, ensure_ascii=False)`: the dicts and the lists of dicts among its values
    from `memo`, its other values encoded together a run of keys at a time."""
    parts: list[str] = []
    run: dict[str, Any] = {}
    for key, value in record.items():
        kind = type(value)
        if kind is dict and type(key) is str:
            text = memo.get(value, dumps)
        elif kind is list and value and type(value[0]) is dict and type(key) is str:
            text = "[" + ", ".join(memo.each(value, dumps, key)) + "]"
        else:  # json.dumps writes a key that is not text as text: it is left to it too
            run[key] = value
            continue
        if run:
            parts.append(dumps(run)[1:-1])
            run = {}
        parts.append(_key(key) + text)
    if run:
        parts.append(dumps(run)[1:-1])
    return "{" + ", ".join(parts) + "}"


@lru_cache(maxsize=256)  # the column names of a format
def _key(key: str) -> str:
    return dumps(key) + ": "
