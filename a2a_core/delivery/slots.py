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

Embedded, the limit is per hub process: each of `a2a serve --workers N` keeps its share, the
limit divided by N, rounded up. Scaled (REDIS_URL set) with HUB_SHARED_SLOTS on, it is the
hub's across every process and host: a call also holds a lease in Redis (`a2a_core.storage.redis_slots`), waiting for one
while the agent's other calls, from any process, hold all of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
from collections import defaultdict, deque
from dataclasses import dataclass, field

from django.conf import settings

from a2a_core import metrics
from a2a_core.backoff import backoff
from a2a_core.errors import HubError
from a2a_core.storage.redis_slots import SharedSlots


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

    def __init__(self, *, share_of: int | None = None, shared: SharedSlots | None = None) -> None:
        self._agents: dict[int, _Agent] = defaultdict(_Agent)
        self._shared = shared
        self._share_of = 1 if shared is not None else share_of or workers()
        self._leasing: set[str] = set()  # calls waiting for a lease (by task id)
        self._withdrawn: set[str] = set()  # of those, the ones withdrawn meanwhile

    def waiting(self, agent_id: int) -> int:
        return len(self._agents[agent_id].waiting)

    def busy(self, agent_id: int) -> int:
        return self._agents[agent_id].busy

    async def acquire(
        self, agent_id: int, label: str, limit: int | None, task_id: str, wait_seconds: float
    ) -> str:
        """Take one of the agent's slots, waiting for one (at most `wait_seconds`, else
        TimeoutError) when all are taken; `release` it, with the lease this returns, when the
        call ends.

        `limit` is the policy's as this call sees it: a raised limit lets waiting calls go at
        once, a lowered one lets the calls under way finish."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_seconds
        await self._acquire_here(agent_id, label, limit, task_id, wait_seconds)
        if self._shared is None or limit is None:
            return ""
        try:
            return await self._lease(agent_id, limit, task_id, deadline)
        except BaseException:
            self._release(self._agents[agent_id])
            raise

    async def _lease(self, agent_id: int, limit: int, task_id: str, deadline: float) -> str:
        """A lease on one of the agent's slots across the hub's processes (scaled mode)."""
        assert self._shared is not None
        loop = asyncio.get_running_loop()
        tries = 0
        self._leasing.add(task_id)
        try:
            while True:
                lease = await self._shared.take(agent_id, limit)
                if lease is not None:
                    return lease
                if task_id in self._withdrawn:
                    raise Dequeued("withdrawn while waiting for a slot")
                left = deadline - loop.time()
                if left <= 0:
                    raise TimeoutError
                tries += 1
                await asyncio.sleep(min(backoff(tries, 0.01, 0.2), left))
        finally:
            self._leasing.discard(task_id)
            self._withdrawn.discard(task_id)

    async def _acquire_here(
        self, agent_id: int, label: str, limit: int | None, task_id: str, wait_seconds: float
    ) -> None:
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

    def release(self, agent_id: int, lease: str = "") -> None:
        self._release(self._agents[agent_id])
        if self._shared is not None:
            self._shared.give_back(agent_id, lease)

    def withdraw(self, task_id: str) -> bool:
        """Take the waiting call of `task_id` out of its queue (it raises `Dequeued`)."""
        for agent in self._agents.values():
            for entry in agent.waiting:
                if entry[0] == task_id:
                    agent.waiting.remove(entry)
                    if not entry[1].done():
                        entry[1].set_exception(Dequeued("withdrawn while waiting for a slot"))
                    return True
        if task_id in self._leasing:
            self._withdrawn.add(task_id)  # it stops at its next try
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


def shared_slots() -> SharedSlots | None:
    """The leases shared across the hub's processes, in scaled mode (REDIS_URL set)."""
    if settings.REDIS_URL and settings.HUB_SHARED_SLOTS:
        return SharedSlots(settings.REDIS_URL)
    return None
