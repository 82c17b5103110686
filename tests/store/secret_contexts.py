"""How a transcript carries a credential: the contexts of the secret corpus.

Each writer takes a kind (its name, the file line it sits in) and its random value, and returns the
text and the parts of it that must not survive redaction.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.store.secret_corpus import Kind

Written = tuple[str, list[str]]  # the text, and the parts that must not survive in it

PLAIN = ("plain", "quoted", "read_file", "diff", "json_arguments", "yaml", "export", "json_config")
SHAPED = ("curl", "bare", "json_raw")  # only for kinds that curl sends, or that have a shape of their own
CONTEXTS = PLAIN + SHAPED


def forms(kind: Kind, new: Written, old: Written) -> dict[str, Written]:
    """Every context that applies to `kind`, holding the value `new` (and `old`, which an edit,
    a diff or a second `export` line replaces)."""
    (value, parts), (old_value, old_parts) = new, old
    both = parts + old_parts
    file, old_file = file_text(kind, value), file_text(kind, old_value)
    written = {
        "plain": (env_lines(kind.env, value), parts),
        "quoted": (_quoted(kind, value), parts),
        "read_file": (numbered(file), parts),
        "diff": (diff(old_file, file), both),
        "json_arguments": (edit_arguments(old_file, file), both),
        "yaml": (_yaml(kind, value), parts),
        "export": (f"$ export {kind.env}={value!r}\n$ export {kind.env}={old_value}\n", both),
        "json_config": (
            json.dumps({"service": {"name": "api", kind.env.lower(): value, "timeout": 30}}, indent=2),
            parts,
        ),
    }
    if kind.curl:
        written["curl"] = (f"$ curl -sS {kind.curl.replace('{v}', value)} https://api.example.com/v1/items\n", parts)
    if kind.bare:
        written["bare"] = (f"The job printed {value} and then stopped.\n", parts)
        content = f"# rotated\n{value}\n"
        written["json_raw"] = (json.dumps({"path": "secrets/credential.txt", "content": content}), parts)
    return written


def env_lines(name: str, value: str) -> str:
    return f"DEBUG=false\n{name}={value}\nPORT=8080\n"


def file_text(kind: Kind, value: str) -> str:
    """The value as it sits in a file the agent reads or edits."""
    return kind.line.replace("{v}", value) + "\n" if kind.line else env_lines(kind.env, value)


def numbered(text: str, path: str = "config/app.env") -> str:
    """`text` as a read_file result shows it: after nine other lines, each line numbered."""
    lines = ("# settings\n" * 9 + text).splitlines(keepends=True)
    width = len(str(len(lines)))
    body = "".join(f"{n:>{width}}| {line}" for n, line in enumerate(lines, 1))
    return f"{path} (lines 1-{len(lines)} of {len(lines)})\n{body}"


def diff(old: str, new: str, path: str = "config/app.env") -> str:
    minus = "".join("-" + line for line in old.splitlines(keepends=True))
    plus = "".join("+" + line for line in new.splitlines(keepends=True))
    return f"--- a/{path}\n+++ b/{path}\n@@ -1,3 +1,3 @@\n {'# settings'}\n{minus}{plus}"


def edit_arguments(old: str, new: str, path: str = "config/app.env") -> str:
    return json.dumps({"path": path, "old_text": old, "new_text": new})


def _yaml(kind: Kind, value: str) -> str:
    if "\n" in value:
        block = "\n".join("    " + line for line in value.splitlines())
        return f"service:\n  name: api\n  {kind.env.lower()}: |\n{block}\n  timeout: 30\n"
    return f"service:\n  name: api\n  {kind.env.lower()}: {value}\n  timeout: 30\n"


def _quoted(kind: Kind, value: str) -> str:
    if "\n" in value:
        return f'{kind.env} = """{value}"""\n'
    return f"settings = Settings(\n    {kind.env.lower()}=\"{value}\",\n    region='eu-west-1',\n)\n"
