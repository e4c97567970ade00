"""Emptying what a hub process keeps between calls, for tests that reset the database.

The hub's process-wide caches (agents, the compiled policy, agents' slugs on the dashboard, the
policy versions' authors, the endpoint slots' counts) and its Redis counters assume one database for the life of the process;
between tests the database is emptied under them. The hub has no use for forgetting them, so
this is the tests' own code, reaching into the modules' state by name.
"""

from __future__ import annotations


def forget_process_state() -> None:
    from a2a_core import jwks
    from a2a_core.delivery import endpoint
    from a2a_core.delivery.slots import Slots, shared_slots
    from a2a_core.selectors import deciders
    from a2a_core.services import policy
    from a2a_core.storage.policy_state import policy_state
    from a2a_core.storage.redis_state import RedisState
    from dashboard import live

    forget_cached_agents()
    jwks.forget()
    # Calls under way release the slots they took into the old counts.
    for forwarder in endpoint._forwarders.values():
        forwarder.slots = Slots(shared=shared_slots())
    live._slugs.clear()
    with deciders._lock:
        deciders._authors.clear()
    with policy._lock:
        policy._cached, policy._checked_at = None, 0.0
    state = policy_state()
    if isinstance(state, RedisState):
        forget_redis_state(state)


def forget_redis_state(state: object) -> None:
    """Every counter and breaker the hub keeps in Redis (under its prefix)."""
    from a2a_core.storage.redis_state import RedisState

    assert isinstance(state, RedisState)
    for key in state.redis.scan_iter(state.prefix + "*"):
        state.redis.delete(key)


def forget_cached_agents() -> None:
    """The agents this process has read (by slug and by token)."""
    from a2a_core import agent_cache

    with agent_cache._lock:
        agent_cache._by_slug.clear()
        agent_cache._by_token.clear()
