"""teachback's feedback store: every event a session emits, in SQLite, and the feedback pairs
(failure -> feedback -> correction) built from them, ready to export as training data."""

from feedback_store.errors import StoreError
from feedback_store.recorder import Recorder
from feedback_store.rows import Pair, SessionSummary
from feedback_store.store import Store, open_store

__all__ = ["Pair", "Recorder", "SessionSummary", "Store", "StoreError", "open_store"]
