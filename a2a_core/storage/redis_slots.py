"""An endpoint agent's calls at once, counted across every hub process (scaled mode).

The contract: with REDIS_URL set, the policy's `incomingConcurrent` bounds an agent's calls in
flight from all the hub's processes together, on every host. Each call holds a lease in one
sorted set per agent (member: the process and the call; score: when the lease runs out, by
Redis's own clock, so hosts' clocks do not matter). A lease is taken only while the set holds
fewer than the limit; a process renews its calls' leases every RENEW_SECONDS while they run,
and the leases of a process that stopped run out after LEASE_SECONDS, which frees a killed
worker's slots within seconds (calls waiting meanwhile spend their own timeout). A process
whose loop stalls past LEASE_SECONDS may let the agent get a call more than its limit for that
while: the limit errs towards delivering.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import socket
from typing import Any

from a2a_core.logging import get_logger, warn_limited

log = get_logger(__name__)

LEASE_SECONDS = 3.0
RENEW_SECONDS = 1.0
PREFIX = "a2ahub:policy:slots:"  # under the policy state's prefix: reset with it

_NOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
"""
_TAKE = (
    _NOW
    + """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2])) + 1)
return 1
"""
)
_RENEW = (
    _NOW
    + """
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[1]), ARGV[i]) end
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[1])) + 1)
return 1
"""
)


class SharedSlots:
    """This process's leases on agents' slots in Redis (one instance per event loop)."""

    def __init__(self, url: str) -> None:
        import redis.asyncio

        self.redis: Any = redis.asyncio.Redis.from_url(url)
        self._take = self.redis.register_script(_TAKE)
        self._renew = self.redis.register_script(_RENEW)
        self._me = f"{socket.gethostname()}:{os.getpid()}:"
        self._numbers = itertools.count()
        self._held: dict[str, set[str]] = {}  # agent key -> leases held
        self._renewer: asyncio.Task[None] | None = None
        self._pending: set[asyncio.Task[None]] = set()

    async def take(self, agent_id: int, limit: int) -> str | None:
        """A lease on one of the agent's `limit` slots, or None when all are taken. When
        Redis cannot be reached the call goes on, counted by this process alone (a warning
        says so): the limit protects the agent, not the hub's availability."""
        key, lease = f"{PREFIX}{agent_id}", f"{self._me}{next(self._numbers)}"
        try:
            taken = await self._take(keys=[key], args=[limit, LEASE_SECONDS, lease])
        except Exception as exc:
            warn_limited(
                log,
                "redis-slots",
                f"agents' shared slots unreachable, counted per process: {exc!r}",
            )
            return ""
        if not taken:
            return None
        self._held.setdefault(key, set()).add(lease)
        if self._renewer is None or self._renewer.done():
            self._renewer = asyncio.create_task(self._renew_held())
        return lease

    def give_back(self, agent_id: int, lease: str) -> None:
        """Free the slot `lease` holds (in the background: the call has ended)."""
        if not lease:
            return
        key = f"{PREFIX}{agent_id}"
        held = self._held.get(key)
        if held is not None:
            held.discard(lease)
            if not held:
                del self._held[key]
        task = asyncio.create_task(self._remove(key, lease))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _remove(self, key: str, lease: str) -> None:
        with contextlib.suppress(Exception):  # else the lease runs out by itself
            await self.redis.zrem(key, lease)

    async def _renew_held(self) -> None:
        while self._held:
            await asyncio.sleep(RENEW_SECONDS)
            for key, leases in list(self._held.items()):
                if leases:
                    with contextlib.suppress(Exception):
                        await self._renew(keys=[key], args=[LEASE_SECONDS, *leases])
