"""When a call passed each point of its way through the hub, for the trace's split of a span's
time into the hub's, the agent's and a human's share.

A call is `received` (the gate has it), `judged` (the policy's decision is made, inside the
group commit), `committed` (the message and its task are stored), `delivered` (handed to the
agent's forwarder), `answered` (the agent's answer is back) and `recorded` (the answer's
row is stamped). Each point is the wall clock in nanoseconds (`time.time_ns`, the clock
`timezone.now()` reads), taken where the call passes it: one clock read a point, nothing
written on the way. The points are stored once, with the answer, on the request's row
(`Message.call_times`), in microseconds from the row's `created_at` (`offsets`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime

POINTS = ("received", "judged", "committed", "delivered", "answered", "recorded")


@dataclass
class CallTimes:
    """The points one call has passed so far (0: not yet)."""

    received: int = field(default_factory=time.time_ns)
    judged: int = 0
    committed: int = 0
    delivered: int = 0
    answered: int = 0

    def now(self, point: str) -> None:
        """The call passes `point` now (again: a stream is answered at its last event)."""
        setattr(self, point, time.time_ns())

    def offsets(self, created_at: datetime, recorded: datetime) -> dict[str, int]:
        """The points passed, as microseconds from `created_at` (received and judged come
        before the row is stamped: negative), `recorded` included."""
        base = _ns(created_at)
        values = {name: getattr(self, name) for name in POINTS[:-1]}
        values["recorded"] = _ns(recorded)
        return {name: (at - base) // 1000 for name, at in values.items() if at}


def _ns(moment: datetime) -> int:
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1000
