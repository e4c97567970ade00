"""Exponential backoff: the one rule every retry in the hub waits by."""

from __future__ import annotations

# 2 ** 40 times any first wait is beyond any cap in use; a larger exponent would only
# overflow a float.
_MOST_DOUBLINGS = 40


def backoff(attempt: int, first: float, most: float = float("inf")) -> float:
    """Seconds to wait after failed attempt number `attempt` (1 for the first failure):
    `first`, doubling with each attempt, never more than `most`."""
    doublings = min(max(attempt - 1, 0), _MOST_DOUBLINGS)
    return min(first * 2**doublings, most)
