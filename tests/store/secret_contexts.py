"""How a transcript carries a credential: the contexts of the secret corpus.

Each writer takes a kind (its name, the file line it sits in) and its random value, and returns the
text and the parts of it that must not survive redaction: the secret itself where it is written
plainly, its encoded form where the text encodes it (base64, percent-encoding); `\\u` escapes are
read unescaped (READERS) before the secret is looked for.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
import textwrap
import urllib.parse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.store.secret_corpus import Kind

Written = tuple[str, list[str]]  # the text, and the parts that must not survive in it
U_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")

PLAIN = ("plain", "quoted", "read_file", "diff", "json_arguments", "yaml", "export", "json_config")
SHAPED = ("curl", "bare", "json_raw")  # only for kinds that curl sends, or that have a shape of their own
NAME_VALUE = (
    "env_list_yaml",
    "env_list_json",
    "key_value_list",
    "env_list_read_file",
    "env_list_diff",
    "env_list_json_arguments",
)
ENCODED = (
    "base64_file",
    "base64_wrapped",
    "base64_json",
    "base64_twice",
    "k8s_secret_data",
    "percent_value",
    "percent_file",
    "unicode_escaped",
)
CONTEXTS = PLAIN + SHAPED + NAME_VALUE + ENCODED


def forms(kind: Kind, rng: random.Random, new: Written, old: Written) -> dict[str, Written]:
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
    env_list, old_env_list = env_list_yaml(rng, kind.env, value), env_list_yaml(rng, kind.env, old_value)
    written |= {
        "env_list_yaml": (env_list, parts),
        "env_list_json": (env_list_json(rng, kind.env, value), parts),
        "key_value_list": (key_value_list(rng, kind.env, value), parts),
        "env_list_read_file": (numbered(env_list, "deploy/api.yaml"), parts),
        "env_list_diff": (diff(old_env_list, env_list, "deploy/api.yaml"), both),
        "env_list_json_arguments": (edit_arguments(old_env_list, env_list, "deploy/api.yaml"), both),
    }
    return written | encoded(kind, value, parts, file)


def encoded(kind: Kind, value: str, parts: list[str], file: str) -> dict[str, Written]:
    """The file, or the value, base64-encoded, percent-encoded or written as `\\uXXXX` escapes."""
    data = b64(file)
    percent = [urllib.parse.quote(p, safe="") for p in parts]
    secret_manifest = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: app\ntype: Opaque\ndata:\n"
    github = {
        "type": "file",
        "encoding": "base64",
        "size": len(file),
        "name": "app.env",
        "path": "config/app.env",
        "content": wrap(data, 60) + "\n",  # as GitHub's contents API sends a file
        "sha": hashlib.sha1(file.encode()).hexdigest(),
    }
    return {
        "base64_file": (f"$ echo '{data}' | base64 -d > config/app.env\n", [data]),
        "base64_wrapped": (f"$ base64 config/app.env\n{wrap(data, 76)}\n", wrap(data, 76).splitlines()),
        "base64_json": (json.dumps(github), wrap(data, 60).splitlines()),
        "base64_twice": (f"{secret_manifest}  app.env: {b64(data)}\n", [b64(data)]),
        "k8s_secret_data": (f"{secret_manifest}  LOG_LEVEL: {b64('info')}\n  {kind.env}: {b64(value)}\n", [b64(value)]),
        "percent_value": (
            "$ curl -sS https://api.example.com/v1/session "
            f"-d 'user=alice&{kind.env.lower()}={urllib.parse.quote(value, safe='')}&remember=1'\n",
            percent,
        ),
        "percent_file": (
            f"$ curl -sS 'https://paste.example.com/api/new?title=app.env&text={urllib.parse.quote(file, safe='')}'\n",
            percent,
        ),
        "unicode_escaped": ('{"path": "config/app.env", "content": "' + _u_escape(file) + '"}', parts),
    }


def unescape(text: str) -> str:
    return U_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text)


# How a context's redacted text is read before looking for what survived of the secret: an escaped
# secret is sought in its unescaped form (windows of its escapes would match any other escapes).
READERS = {"unicode_escaped": unescape}


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def wrap(text: str, width: int) -> str:
    return "\n".join(textwrap.wrap(text, width))


def _u_escape(text: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in text)


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


# --- name/value lists: the name and the value in two entries of one list item -----------------


def yaml_scalar(rng: random.Random, value: str, indent: int) -> str:
    """`value` as YAML writes it: a block for several lines, else plain, double- or single-quoted."""
    if "\n" in value:
        return "|\n" + "\n".join(" " * indent + line for line in value.splitlines())
    plain_ok = value[0] not in "!&*{}[]|>'\"%@`#,?:-" and ": " not in value and " #" not in value
    style = rng.choice(["plain", "double", "single"] if plain_ok else ["double", "single"])
    if style == "plain":
        return value
    return json.dumps(value) if style == "double" else "'" + value.replace("'", "''") + "'"


def env_list_yaml(rng: random.Random, name: str, value: str) -> str:
    """A Kubernetes Deployment's container `env`: `- name: X` and `value: ...` on the next line."""
    return (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: api\nspec:\n  template:\n    spec:\n"
        "      containers:\n        - name: api\n          image: registry.example.com/api:1.4.2\n          env:\n"
        "            - name: LOG_LEVEL\n              value: info\n"
        f"            - name: {name}\n              value: {yaml_scalar(rng, value, 16)}\n"
        '            - name: PORT\n              value: "8080"\n'
    )


def env_list_json(rng: random.Random, name: str, value: str) -> str:
    """The same list in JSON: an ECS task definition's `environment`, or a pod's `env`."""
    env = [{"name": "LOG_LEVEL", "value": "info"}, {"name": name, "value": value}, {"name": "PORT", "value": "8080"}]
    if rng.random() < 0.5:
        doc: dict = {"family": "api", "containerDefinitions": [{"name": "api", "environment": env}]}
    else:
        doc = {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [{"name": "api", "env": env}]}}
    return json.dumps(doc, indent=rng.choice([None, 2, 4]))


def key_value_list(rng: random.Random, name: str, value: str) -> str:
    """`key`/`value` shapes: a Render blueprint's envVars, Vercel's env API, a CloudFormation
    parameters file, the AWS CLI's shorthand."""
    shape = 1 if "\n" in value else rng.randrange(4)
    if shape == 0:
        return (
            f"envVars:\n  - key: LOG_LEVEL\n    value: info\n  - key: {name}\n    value: {yaml_scalar(rng, value, 6)}\n"
        )
    if shape == 1:
        return json.dumps([{"key": name, "value": value, "target": ["production"], "type": "encrypted"}], indent=2)
    if shape == 2:
        camel = "".join(part.capitalize() for part in name.split("_"))
        parameters = [
            {"ParameterKey": "Stage", "ParameterValue": "prod"},
            {"ParameterKey": camel, "ParameterValue": value},
        ]
        return json.dumps(parameters, indent=2)
    return (
        "$ aws ecs register-task-definition --family api --container-definitions "
        f"'name=api,image=api:1.4.2,environment=[{{name=LOG_LEVEL,value=info}},{{name={name},value={value}}}]'\n"
    )
