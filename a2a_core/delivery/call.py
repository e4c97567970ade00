"""A call at the hub: who calls whom, with what headers, and what serving it found out."""

from __future__ import annotations

from dataclasses import dataclass, field

from a2a.utils.errors import UnsupportedOperationError

from a2a_core.call_times import CallTimes
from a2a_core.models import Agent


@dataclass(frozen=True)
class Call:
    """Who calls whom: the authenticated caller and the agent whose endpoint was called
    (None for the hub's own endpoint), with the request's headers (lower-cased names).
    `response_headers` are added to the HTTP response (e.g. Retry-After on a refusal)."""

    caller: Agent
    target: Agent | None
    headers: dict[str, str] = field(default_factory=dict)
    response_headers: dict[str, str] = field(default_factory=dict)
    # What serving the call found out (task_id, skill, trace_id), for its metrics and log;
    # message_pk, the hub's row of the message it sent, for a receipt.
    learned: dict[str, str] = field(default_factory=dict)
    # When it passed each point of its way (the trace's split of a span's time).
    times: CallTimes = field(default_factory=CallTimes)

    @property
    def agent(self) -> Agent:
        if self.target is None:
            raise UnsupportedOperationError(
                "address an agent: send messages to /a2a/<agent>/, not to the hub itself"
            )
        return self.target
