"""The one exception the store raises for people to read."""

from __future__ import annotations


class StoreError(Exception):
    """The feedback database cannot be used; the message says why and how to fix it."""
