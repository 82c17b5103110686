"""Content hashes that name their algorithm, so stored keys stay valid if the algorithm changes."""

from __future__ import annotations

import hashlib
import json
from typing import Any

ALGORITHM = "sha256"


def content_hash(text: str) -> str:
    return f"{ALGORITHM}:{hashlib.sha256(text.encode('utf-8')).hexdigest()}"


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no spaces: equal data gives equal text (and equal hashes)."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
