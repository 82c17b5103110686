"""Environment variables set for a block of work and put back as they were after it."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager


@contextmanager
def environment(values: Mapping[str, str]) -> Iterator[None]:
    """`values` in os.environ inside the block; afterwards each variable is as before (unset again
    when it was unset)."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
