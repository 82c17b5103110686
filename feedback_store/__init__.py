"""teachback's feedback store: every event a session emits, in SQLite, and the feedback pairs
(failure -> feedback -> correction) built from them, ready to export as training data.

The public names load on first use, so importing one of its modules stays fast.
"""

from __future__ import annotations

_EXPORTS = {
    "StoreError": "feedback_store.errors",
    "Recorder": "feedback_store.recording.recorder",
    "Recording": "feedback_store.recording.recording",
    "attach": "feedback_store.recording.recording",
    "Pair": "feedback_store.rows",
    "SessionSummary": "feedback_store.rows",
    "Store": "feedback_store.store",
    "open_store": "feedback_store.store",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'feedback_store' has no attribute {name!r}")
    from importlib import import_module  # here: a hook process imports this package and must stay lean

    return getattr(import_module(module), name)
