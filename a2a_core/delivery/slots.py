"""How many calls the hub has at an endpoint agent's server at once.

The policy's `incomingConcurrent` (default 10) bounds them per agent; a call over it waits in
the hub, first come first served, until one of the agent's calls ends, within the call's own
timeout. An agent is spared a storm it would answer late anyway, and the calls waiting are
counted (`a2a_call_queue_size{target}`).

It also keeps an agent that does its work on a CPU from slowing itself down: such a server
works on every request it has at once, so sixteen calls sent together all end together,
after sixteen calls' worth of work, and the hub idles meanwhile. With ten at most, the hub
prepares the next calls while the agent answers the first (bench/throughput.py: +22% calls
per second through the hub at concurrency 16).

The limit is per hub process: each of `a2a serve --workers N` keeps its share, the limit
divided by N, rounded up.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
from collections import defaultdict, deque
from dataclasses import dataclass, field

from a2a_core import metrics
from a2a_core.errors import HubError


class Dequeued(HubError):
    """The call was withdrawn while it waited for a slot (its task was canceled)."""

    code = "dequeued"


@dataclass
class _Agent:
    limit: int | None = None
    busy: int = 0
    waiting: deque[tuple[str, asyncio.Future[None]]] = field(default_factory=deque)


def workers() -> int:
    """The hub processes sharing each agent's limit (`a2a serve --workers`)."""
    value = os.environ.get("HUB_WORKERS", "1")
    return max(1, int(value)) if value.isdigit() else 1


class Slots:
    """Calls in flight per agent (by primary key), and the calls waiting for one to end."""

    def __init__(self, *, share_of: int | None = None) -> None:
        self._agents: dict[int, _Agent] = defaultdict(_Agent)
        self._share_of = share_of or workers()

    def waiting(self, agent_id: int) -> int:
        return len(self._agents[agent_id].waiting)

    def busy(self, agent_id: int) -> int:
        return self._agents[agent_id].busy

    async def acquire(
        self, agent_id: int, label: str, limit: int | None, task_id: str, wait_seconds: float
    ) -> None:
        """Take one of the agent's slots, waiting for one (at most `wait_seconds`, else
        TimeoutError) when all are taken; `release` it when the call ends.

        `limit` is the policy's as this call sees it: a raised limit lets waiting calls go at
        once, a lowered one lets the calls under way finish."""
        agent = self._agents[agent_id]
        agent.limit = None if limit is None else math.ceil(limit / self._share_of)
        if not agent.waiting and self._free(agent):
            agent.busy += 1
            return
        future = asyncio.get_running_loop().create_future()
        agent.waiting.append((task_id, future))
        self._hand_over(agent)
        metrics.CALL_QUEUE.labels(label).inc()
        try:
            async with asyncio.timeout(wait_seconds):
                await future  # the slot is ours once it resolves (`_hand_over` counted it)
        except BaseException:
            if future.done() and not future.cancelled() and future.exception() is None:
                self._release(agent)
            else:
                with contextlib.suppress(ValueError):
                    agent.waiting.remove((task_id, future))
            raise
        finally:
            metrics.CALL_QUEUE.labels(label).dec()

    def release(self, agent_id: int) -> None:
        self._release(self._agents[agent_id])

    def withdraw(self, task_id: str) -> bool:
        """Take the waiting call of `task_id` out of its queue (it raises `Dequeued`)."""
        for agent in self._agents.values():
            for entry in agent.waiting:
                if entry[0] == task_id:
                    agent.waiting.remove(entry)
                    if not entry[1].done():
                        entry[1].set_exception(Dequeued("withdrawn while waiting for a slot"))
                    return True
        return False

    def _free(self, agent: _Agent) -> bool:
        return agent.limit is None or agent.busy < agent.limit

    def _release(self, agent: _Agent) -> None:
        agent.busy -= 1
        self._hand_over(agent)

    def _hand_over(self, agent: _Agent) -> None:
        while agent.waiting and self._free(agent):
            _, future = agent.waiting.popleft()
            if not future.done():
                agent.busy += 1
                future.set_result(None)
