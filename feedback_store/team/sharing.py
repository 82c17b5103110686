"""What a user agreed to share with their team: per session, per repository, and per workspace.

Nothing is shared until the user says so. `teachback share` / `unshare` set a session's or a
repository's setting (a repository by its identity, so every clone and every later session of it
follows). A workspace's teachback.toml may turn sharing on for the sessions recorded in it
(`share = true`), but only once the user has allowed that workspace (`teachback share --workspace`):
a cloned repository cannot share anyone's sessions by itself. The most specific setting wins:
session, then repository, then the allowed workspace's file; a session none of them covers is not
shared. `teachback merge` writes each session's outcome into the team store as a session setting,
so the team store needs none of the developers' folders.
"""

from __future__ import annotations

import logging
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from feedback_store.store import Store

log = logging.getLogger(__name__)

SCOPES = ("session", "repository", "workspace")
CONFIG_FILE = "teachback.toml"
Query = Callable[[str, tuple], list[dict[str, Any]]]
NOT_SET = "not shared: no share setting covers it (sharing is off until `teachback share`)"


@dataclass(frozen=True)
class Share:
    shared: bool
    reason: str


def set_share(store: Store, scope: str, key: str, shared: bool | None, reason: str) -> bool:
    """Set (or, with `shared` None, forget) one setting; whether a setting was there before."""
    with store.write() as conn:
        before = conn.execute("SELECT 1 FROM share_settings WHERE scope = ? AND key = ?", (scope, key)).fetchone()
        if shared is None:
            conn.execute("DELETE FROM share_settings WHERE scope = ? AND key = ?", (scope, key))
        else:
            conn.execute(
                "INSERT OR REPLACE INTO share_settings (scope, key, shared, reason, set_at) VALUES (?, ?, ?, ?, ?)",
                (scope, key, int(shared), reason, time.time()),
            )
    return before is not None


def settings(query: Query) -> dict[tuple[str, str], Share]:
    if not query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'share_settings'", ()):
        return {}  # a store from before sharing: nothing was agreed
    rows = query("SELECT scope, key, shared, reason FROM share_settings", ())
    return {(r["scope"], r["key"]): Share(bool(r["shared"]), r["reason"] or "") for r in rows}


def resolve(query: Query, workspace_share: Callable[[str], bool | None] | None = None) -> dict[str, Share]:
    """Every session's share state and why. `workspace_share` reads a workspace's own file (the
    default: its teachback.toml)."""
    read = workspace_share or workspace_setting
    known = settings(query)
    files: dict[str, bool | None] = {}
    out = {}
    for row in query("SELECT id, repository, workspace FROM sessions ORDER BY id", ()):
        own = known.get(("session", row["id"]))
        repo = known.get(("repository", row["repository"])) if row["repository"] else None
        allowed = known.get(("workspace", row["workspace"])) if row["workspace"] else None
        if own is not None:
            out[row["id"]] = own
        elif repo is not None:
            out[row["id"]] = repo
        elif allowed is not None and allowed.shared:
            if row["workspace"] not in files:
                files[row["workspace"]] = read(row["workspace"])
            on = files[row["workspace"]]
            out[row["id"]] = Share(
                bool(on),
                "shared by its workspace's teachback.toml (share = true), which you allowed"
                if on
                else "not shared: its workspace's teachback.toml does not set share = true",
            )
        else:
            out[row["id"]] = Share(False, NOT_SET)
    return out


def workspace_setting(folder: str) -> bool | None:
    """`share` in the folder's teachback.toml ([teachback] table or top level); None when the file
    or the setting is not there or cannot be read (then nothing is shared, and the log says why)."""
    path = Path(folder) / CONFIG_FILE
    if not path.is_file():
        return None
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        log.warning("%s cannot be read (%s); its sessions are not shared by it", path, exc)
        return None
    table = data.get("teachback", data)
    value = table.get("share") if isinstance(table, dict) else None
    return value if isinstance(value, bool) else None


def describe(query: Query) -> list[str]:
    """The settings, one line each, for `teachback share --list`."""
    lines = []
    for (scope, key), share in sorted(settings(query).items()):
        what = (
            "allowed to decide"
            if scope == "workspace" and share.shared
            else ("shared" if share.shared else "not shared")
        )
        lines.append(f"{scope} {key}: {what} ({share.reason})")
    return lines
