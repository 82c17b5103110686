"""Where an exported record came from: the agent and its version, the model, the repository's
identity and commit, a salted hash of the user and machine, teachback's version, and the pair's
content hash, so a corpus gathered from many people diffs, deduplicates and filters cleanly.

The author is never a name: it is an HMAC of `user@machine` keyed by a random salt the store made
when it was created (`store_meta`), which no export carries. It is stamped when a session is
recorded or imported, on the machine that recorded it, so a merged team store keeps each session's.
A repository is named by its root commit (`git:<sha>`) or, where only its remote is known, by the
remote without credentials (`remote:host/path`); never by a folder.
"""

from __future__ import annotations

import getpass
import hashlib
import hmac
import os
import re
import socket
import sqlite3
from functools import cache
from typing import Any

from feedback_store.store import Store

TEACHBACK_AGENT = "teachback"
FIELDS = ("agent", "agent_version", "model", "repository", "commit", "author", "teachback_version", "content_hash")


@cache
def teachback_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("teachback")
    except PackageNotFoundError:
        return "unknown"


@cache
def _who() -> str:
    """This user and machine: asked once per process (the user's name may take a password-database
    lookup, and every recorded session is stamped with it)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # a container user with no passwd entry
        user = str(os.getuid()) if hasattr(os, "getuid") else "unknown"
    return f"{user}@{socket.gethostname()}"


def author_id(conn: sqlite3.Connection) -> str | None:
    """This user and machine, as the store's salted hash (None in a store without a salt)."""
    row = conn.execute("SELECT value FROM store_meta WHERE key = 'salt'").fetchone()
    if row is None:
        return None
    digest = hmac.new(bytes.fromhex(row[0]), _who().encode("utf-8"), hashlib.sha256).hexdigest()
    return f"hmac-sha256:{digest[:32]}"


def stamp(conn: sqlite3.Connection, session_id: str, agent: str, agent_version: str | None) -> None:
    """Mark a session as recorded here by `agent`; values already set (a merged session's) stay."""
    conn.execute(
        """UPDATE sessions SET agent = coalesce(agent, ?), agent_version = coalesce(agent_version, ?),
           author = coalesce(author, ?) WHERE id = ?""",
        (agent, agent_version, author_id(conn), session_id),
    )


_USERINFO = re.compile(r"^[a-z][a-z0-9+.-]*://[^/@]*@", re.I)


def remote_identity(url: str | None) -> str | None:
    """A remote URL as a repository identity: no scheme, credentials, user or `.git`
    (https://user:token@github.com/org/repo.git and git@github.com:org/repo both give
    remote:github.com/org/repo)."""
    if not url or not url.strip():
        return None
    text = _USERINFO.sub("", url.strip())
    text = re.sub(r"^[a-z][a-z0-9+.-]*://", "", text, flags=re.I)
    text = re.sub(r"^[^@/]+@([^:/]+):", r"\1/", text)  # scp-like git@host:path
    text = text.rstrip("/")
    text = text[:-4] if text.endswith(".git") else text
    return f"remote:{text.lower()}" if text else None


class Origins:
    """The provenance of a store's sessions, read once per session."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.cache: dict[str, dict[str, Any]] = {}

    def of(self, session_id: str, content_hash: str | None = None) -> dict[str, Any]:
        if session_id not in self.cache:
            rows = self.store.query(
                "SELECT agent, agent_version, model, repository, git_head, author FROM sessions WHERE id = ?",
                (session_id,),
            )
            row = rows[0] if rows else {}
            self.cache[session_id] = {
                "agent": row.get("agent") or TEACHBACK_AGENT,
                "agent_version": row.get("agent_version"),
                "model": row.get("model"),
                "repository": _identity(row.get("repository")),
                "commit": row.get("git_head"),
                "author": row.get("author"),
                "teachback_version": teachback_version(),
            }
        return {**self.cache[session_id], "content_hash": content_hash}


def _identity(value: str | None) -> str | None:
    """Only identities leave the store: a value that looks like a folder is dropped."""
    if value is None or value.startswith(("git:", "remote:")):
        return value
    return None


def content_key(hexdigest: str) -> str:
    return f"sha256:{hexdigest}"
