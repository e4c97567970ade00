"""A per-process cache of agents by token and by slug, for the A2A hot path.

Every A2A call needs its caller (by bearer token) and its target (by slug). Entries are
dropped when an `agent.*` event says the agent changed (registration, suspension, token
rotation) — at once in this process, and in other processes as soon as the event reaches them
through the channel layer — and in any case `TTL` seconds after the read that loaded them
began. So `TTL` seconds after a change commits, every process sees it, whatever became of its
event: also a process that shares no channel layer with the one that made the change (an `a2a`
command beside the embedded hub). `a2a token rotate` and `a2a suspend` wait that long before
they return (`wait_until_seen`). One read per agent and process a second, at most.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from a2a_core.models import Agent
from a2a_core.schemas.events import AgentChanged, parse_event
from a2a_core.tokens import token_hash

TTL = 1.0

_lock = threading.Lock()
_by_token: dict[str, tuple[float, Agent]] = {}
_by_slug: dict[str, tuple[float, Agent]] = {}


def _fresh(entry: tuple[float, Agent] | None) -> Agent | None:
    if entry is None or entry[0] < time.monotonic():
        return None
    return entry[1]


def _load(agent: Agent) -> Agent:
    # Skills are read on every call (metrics, policy by skill): keep them with the agent.
    agent.skill_ids = tuple(agent.skills.order_by("skill_id").values_list("skill_id", flat=True))  # type: ignore[attr-defined]
    return agent


def cached(*, token: str | None = None, slug: str | None = None) -> Agent | None:
    """A cached agent without touching the database (safe on the event loop); None on a miss."""
    if token is not None:
        return _fresh(_by_token.get(token_hash(token)))
    if slug is not None:
        return _fresh(_by_slug.get(slug))
    return None


def agent_by_token(token: str) -> Agent | None:
    """The agent this bearer token belongs to (sync: call on the database thread)."""
    if not token:
        return None
    digest = token_hash(token)
    if cached := _fresh(_by_token.get(digest)):
        return cached
    # Counted from before the read: the read may see the agent as it was just before a change.
    until = time.monotonic() + TTL
    agent = Agent.objects.filter(token_hash=digest).first()
    if agent is None:
        return None
    _remember(_load(agent), until)
    return agent


def agent_by_slug(slug: str) -> Agent | None:
    if cached := _fresh(_by_slug.get(slug)):
        return cached
    until = time.monotonic() + TTL
    agent = Agent.objects.filter(slug=slug).first()
    if agent is None:
        return None
    _remember(_load(agent), until)
    return agent


def wait_until_seen() -> None:
    """Block until every process's cache has let go of what it held before a change that
    has just committed (sync; for commands, after the change)."""
    time.sleep(TTL)


def _remember(agent: Agent, until: float) -> None:
    with _lock:
        _by_slug[agent.slug] = (until, agent)
        if agent.token_hash:
            _by_token[agent.token_hash] = (until, agent)


def forget(*, agent_id: int | None = None, slug: str | None = None) -> None:
    with _lock:
        for index in (_by_slug, _by_token):
            for key in [k for k, (_, a) in index.items() if a.pk == agent_id or a.slug == slug]:
                del index[key]


def on_event(group: str, payload: dict[str, Any]) -> None:
    """Event listener: forget an agent whenever something about it changed."""
    if group == "agents" and isinstance(event := parse_event(payload), AgentChanged):
        forget(agent_id=event.agent_id, slug=event.slug)
