"""What the policy costs in Redis per call: scaled mode's hot path waits on every round trip."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from a2a_core.storage.policy_state import policy_state
from a2a_core.storage.redis_state import RedisState
from tests.a2a_core.protocol.helpers import request, send
from tests.process_state import forget_redis_state

pytestmark = pytest.mark.live


class _CountingConnection(redis.Connection):
    """A real connection that counts what it sends: one packet per command or pipeline, so
    one per round trip."""

    lock = threading.Lock()
    sent = 0

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        with self.lock:
            type(self).sent += 1
        super().send_packed_command(command, check_health)


@pytest.fixture
def redis_policy(settings: Any) -> Iterator[type[_CountingConnection]]:
    """The hub's policy state in Redis (the scaled mode's), its round trips counted."""
    settings.REDIS_URL = settings.REDIS_URL or os.environ.get(
        "HUB_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"
    )
    policy_state.cache_clear()
    state = policy_state()
    assert isinstance(state, RedisState)
    state.redis.connection_pool.connection_class = _CountingConnection
    forget_redis_state(state)
    yield _CountingConnection
    forget_redis_state(state)
    state.redis.close()
    policy_state.cache_clear()


async def test_a_call_costs_one_redis_round_trip(hub, sdk, redis_policy):
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client = await sdk("echo", token)
    await send(client, request("warm up"))  # opens the connection, loads the scripts

    before = redis_policy.sent
    for i in range(10):
        await send(client, request(f"echo {i}"))
    assert redis_policy.sent - before == 10


async def test_concurrent_calls_cost_at_most_one_redis_round_trip_each(hub, sdk, redis_policy):
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client = await sdk("echo", token)
    await send(client, request("warm up"))

    before = redis_policy.sent
    await asyncio.gather(*(send(client, request(f"echo {i}")) for i in range(16)))
    assert redis_policy.sent - before <= 16
