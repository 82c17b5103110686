"""JSON text as `json.dumps` writes it with given options, without its per-call set-up.

`json.dumps` with any option set builds a new encoder for every call, which costs more than
encoding a small value (a message, a tool call). `dumps_with` builds the same C encoder once; the
text is the same text json.dumps gives for those options. There is no circular-reference check: the
values encoded are trees read from JSON.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json import encoder
from typing import Any


def dumps_with(
    *, ensure_ascii: bool = True, sort_keys: bool = False, separators: tuple[str, str] = (", ", ": ")
) -> Callable[[Any], str]:
    """A function that gives `json.dumps(value, ensure_ascii=..., sort_keys=..., separators=...)`."""
    options = json.JSONEncoder(
        ensure_ascii=ensure_ascii, sort_keys=sort_keys, separators=separators, check_circular=False
    )
    if encoder.c_make_encoder is None:  # an interpreter without the C accelerator
        return options.encode
    strings = encoder.encode_basestring_ascii if ensure_ascii else encoder.encode_basestring
    make = encoder.c_make_encoder(
        None, options.default, strings, None, options.key_separator, options.item_separator, sort_keys, False, True
    )

    def dumps(value: Any) -> str:
        return "".join(make(value, 0))

    return dumps


# json.dumps(value, ensure_ascii=False): the form the store's message rows, the export's lines and
# the redactor's JSON values are written in.
dumps_unicode = dumps_with(ensure_ascii=False)
