"""The dataset folder `teachback export --hub` writes.

A hub folder is what `datasets.load_dataset(folder)` and a dataset hub read as it is: `data/<split>-
00000-of-00001.parquet` and a README.md whose YAML header declares the license, task categories,
size and source, and the splits' files. Parquet needs one shape per column, so a column of messages
becomes messages with one set of fields (`role`, `content` as text, `tool_calls` with their
arguments as JSON text, `tool_call_id`), provenance stays a struct of plain values, and every other
nested value (tool schemas, renders, ground truth) is JSON text. Below the header is the export's own
card: what was written, what was left out and why.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

SIZES = ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"))


def write_hub(folder: Path, staged: list[Path], card: Path | None, fmt: str, license_id: str) -> Path:
    """Write the dataset folder: every file first under a temporary name, then all put in place (an
    earlier export's parquet files replaced), so a folder that cannot be written keeps what it had."""
    from feedback_store.errors import StoreError
    from feedback_store.export.export_io import make_folders, remove_empty

    data = folder / "data"
    readme = folder / "README.md"
    temporary: list[tuple[Path, Path]] = []  # (written, where it goes)
    made: list[Path] = []
    try:
        made = make_folders(data)
        total, agents, splits = _write_splits(data, staged, temporary)
        section = card.read_text(encoding="utf-8") if card is not None and card.exists() else ""
        text = _header(fmt, license_id, total, splits, agents) + section
        written = readme.with_name(f".{readme.name}.teachback-tmp")
        temporary.append((written, readme))
        written.write_text(text, encoding="utf-8")
        kept = {final for _, final in temporary}
        for old in data.glob("*.parquet"):
            if old not in kept:
                old.unlink()
        for written, final in temporary:
            os.replace(written, final)
    except OSError as exc:  # pyarrow's errors writing a file are OSErrors too
        for written, _ in temporary:
            with contextlib.suppress(FileNotFoundError):
                written.unlink()
        remove_empty(made)
        raise StoreError(
            f"Cannot write the dataset folder {folder}: {exc.strerror or exc}. Nothing was written; choose an "
            "--out folder you may write (check its permissions, and on Linux its immutable flag: lsattr, chattr -i)."
        ) from exc
    return readme


def _write_splits(
    data: Path, staged: list[Path], temporary: list[tuple[Path, Path]]
) -> tuple[int, Counter[str], list[str]]:
    """Each staged split as parquet under a temporary name in `data` (added to `temporary`)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    total, agents, splits = 0, Counter[str](), []
    for path in staged:
        split = "test" if path.stem.endswith(".test") else "train"
        rows = _read(path)
        total += len(rows)
        agents.update((r.get("provenance") or r.get("extra", {}).get("provenance") or {}).get("agent") for r in rows)
        final = data / f"{split}-00000-of-00001.parquet"
        written = final.with_name(f".{final.name}.teachback-tmp")
        temporary.append((written, final))
        pq.write_table(pa.Table.from_pylist(hub_rows(rows)), written)
        splits.append(split)
    return total, agents, splits


def _read(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def hub_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with one shape per column (see the module's docstring)."""
    keys = list(dict.fromkeys(k for r in rows for k in r))
    messages = {k for k in keys if _messages_column([r.get(k) for r in rows])}
    out = []
    for row in rows:
        flat: dict[str, Any] = {}
        for key in keys:
            value = row.get(key)
            if key in messages and value is not None:
                flat[key] = [_message(m) for m in value]
            elif key == "provenance" and isinstance(value, dict):
                flat[key] = {k: None if v is None else str(v) for k, v in value.items()}
            elif isinstance(value, (dict, list)):
                flat[key] = json.dumps(value, ensure_ascii=False)
            else:
                flat[key] = value
        out.append(flat)
    return out


def _messages_column(values: list[Any]) -> bool:
    present = [v for v in values if v is not None]
    return bool(present) and all(
        isinstance(v, list) and all(isinstance(m, dict) and "role" in m for m in v) for v in present
    )


def _message(message: dict[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    calls = message.get("tool_calls") or None
    return {
        "role": str(message.get("role")),
        "content": content if isinstance(content, str) else ("" if content is None else json.dumps(content)),
        "tool_calls": None
        if calls is None
        else [
            {
                "id": str(c.get("id") or ""),
                "type": "function",
                "function": {
                    "name": str((c.get("function") or {}).get("name") or ""),
                    "arguments": _text((c.get("function") or {}).get("arguments")),
                },
            }
            for c in calls
        ],
        "tool_call_id": message.get("tool_call_id"),
    }


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _header(fmt: str, license_id: str, total: int, splits: list[str], agents: Counter[str]) -> str:
    size = next((name for limit, name in SIZES if total < limit), "n>1M")
    sources = ", ".join(f"{agent or 'unknown'} ({n})" for agent, n in sorted(agents.items(), key=lambda kv: str(kv[0])))
    lines = [
        "---",
        f"license: {license_id}",
        "task_categories:",
        "- text-generation",
        "tags:",
        "- teachback",
        "- agent-feedback",
        "- tool-use",
        f"- {fmt}",
        "size_categories:",
        f"- {size}",
        "source_datasets:",
        "- original",
        f"pretty_name: teachback feedback ({fmt})",
        "configs:",
        "- config_name: default",
        "  data_files:",
        *(f"  - split: {s}\n    path: data/{s}-*.parquet" for s in splits),
        "---",
        "",
        f"# teachback feedback dataset ({fmt})",
        "",
        "Source: coding-agent sessions recorded or imported by teachback (a failed tool call, the "
        "feedback it got, and what fixed it), exported with `teachback export --hub`. "
        f"Records by agent: {sources}. Each record's `provenance` names its agent and version, model, "
        "repository (root commit or remote), commit, a salted hash of its author, teachback's version "
        "and its content hash.",
        "",
    ]
    return "\n".join(lines) + "\n"
