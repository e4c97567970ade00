"""The policy's clock: seconds since the epoch. Read time here and nowhere else in the
policy, so that rate windows and breaker cool-downs can be moved forward in tests."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

_offset = 0.0


def now() -> float:
    return time.time() + _offset


@contextmanager
def shifted(seconds: float) -> Iterator[None]:
    """Run the block `seconds` in the future."""
    global _offset
    _offset += seconds
    try:
        yield
    finally:
        _offset -= seconds
