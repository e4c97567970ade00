"""Who may hold an inbox session, and ending the sessions of agents that no longer may.

A session — a websocket, or a long-poll waiting for work — is let in with the agent's own
token, while the agent is an inbox agent with the a2a:receive scope and is not suspended. It
is ended as soon as that stops being true: its token rotated, the agent suspended or deleted.
Every process keeps its open sessions here. The `agent.*` event of a change reaches every
process's bus listener (`a2a_core.runtime`), which checks that agent's sessions at once; the
sweeper checks all of them against the database every pass, in case an event was lost or the
change was made by a process that shares no channel layer with this one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass

from a2a_core import agent_cache
from a2a_core.asyncdb import db
from a2a_core.errors import (
    AgentSuspended,
    HubError,
    NotFound,
    PermissionDenied,
    Unauthenticated,
)
from a2a_core.logging import get_logger
from a2a_core.models import Agent, AgentStatus, DeliveryMode
from a2a_core.models import Scope as AgentScope

log = get_logger("inbox")


class WrongMode(HubError):
    code = "not_an_inbox_agent"


def inbox_refusal(agent: Agent) -> HubError | None:
    """Why `agent`, authenticated with its own token, may not hold an inbox session; None
    if it may."""
    if agent.delivery_mode != DeliveryMode.INBOX:
        return WrongMode(
            f"{agent.slug} is an endpoint agent: the hub calls its server, it has no inbox"
        )
    if not agent.has_scope(AgentScope.RECEIVE):
        return PermissionDenied(f"{agent.slug}'s token lacks the a2a:receive scope")
    if agent.status == AgentStatus.SUSPENDED:
        return AgentSuspended(agent.slug, agent.status_reason)
    return None


def inbox_agent(token: str, slug: str) -> Agent:
    """The inbox agent `slug`, if `token` is its own and it may hold a session; raise why
    not otherwise (sync: call on the database thread)."""
    if not token:
        raise Unauthenticated("send 'Authorization: Bearer <token>' (the agent's hub token)")
    caller = agent_cache.agent_by_token(token)
    if caller is None:
        raise Unauthenticated("the bearer token is unknown or was rotated")
    if caller.slug != slug:
        if agent_cache.agent_by_slug(slug) is None:
            raise NotFound(f"no agent {slug!r} is registered")
        raise PermissionDenied(f"this token belongs to {caller.slug}, not {slug}")
    if refusal := inbox_refusal(caller):
        raise refusal
    return caller


@dataclass(eq=False)
class Session:
    """An open inbox session of this process. `end` closes it, telling the agent why."""

    agent_id: int
    slug: str
    # The hash of the token the session was let in with.
    token_hash: str
    end: Callable[[HubError], Awaitable[None]]


_open: set[Session] = set()


def session_open(session: Session) -> None:
    _open.add(session)


def session_close(session: Session) -> None:
    _open.discard(session)


def _agents(agent_ids: Collection[int]) -> dict[int, Agent]:
    fields = ("pk", "slug", "status", "status_reason", "token_hash", "delivery_mode", "scopes")
    return {a.pk: a for a in Agent.objects.filter(pk__in=agent_ids).only(*fields)}


def _revoked(session: Session, agent: Agent | None) -> HubError | None:
    if agent is None:
        return Unauthenticated(f"{session.slug} was deleted; its token no longer works")
    if agent.token_hash != session.token_hash:
        return Unauthenticated("the bearer token was rotated; connect with the new one")
    return inbox_refusal(agent)


async def sessions_check(*, agent_ids: Collection[int] | None = None) -> int:
    """End this process's sessions (of `agent_ids`, or all) whose agent may no longer hold
    one, each with the reason; returns how many were ended."""
    sessions = [s for s in _open if agent_ids is None or s.agent_id in agent_ids]
    if not sessions:
        return 0
    agents = await db(_agents, {s.agent_id for s in sessions})
    ended = 0
    for session in sessions:
        reason = _revoked(session, agents.get(session.agent_id))
        if reason is None or session not in _open:
            continue
        _open.discard(session)
        ended += 1
        try:
            await session.end(reason)
        except Exception:
            log.warning("could not end an inbox session", exc_info=True)
    return ended
