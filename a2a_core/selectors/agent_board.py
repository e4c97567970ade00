"""Reads for the agents screens: who is there, what each is doing, how busy it has been."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from django.db.models import Count, Exists, OuterRef, Subquery
from django.utils import timezone

from a2a_core.models import Agent, DeliveryMode, Message, Scope, Task, TaskState
from a2a_core.selectors import effective_status

# What an agent is working on: tasks addressed to it that have not ended.
WORKING_STATES = [TaskState.SUBMITTED, TaskState.WORKING, TaskState.INPUT_REQUIRED]


@dataclass
class AgentRow:
    agent: Agent
    status: str
    skills: list[str]
    working_on: list[Task] = field(default_factory=list)
    open_tasks: int = 0
    sent_hour: int = 0
    received_hour: int = 0
    # How it receives work: endpoint, inbox, or "caller" (it only calls; see `only_calls`).
    mode: str = ""


# What an agent that only calls shows as its status and mode.
CALLER = "caller"


def only_calls(agent: Agent) -> bool:
    """An agent that calls and never receives work: without the a2a:receive scope, or an
    inbox agent (a card without a URL, as a caller's minimal card is) that never connected
    and was never sent a task. Such an agent is a caller, not an inbox agent offline for
    good. Needs `served` annotated (see `agent_board`) and the stored `last_seen_at`."""
    if not agent.has_scope(Scope.RECEIVE):
        return True
    return (
        agent.delivery_mode == DeliveryMode.INBOX
        and agent.last_seen_at is None
        and not getattr(agent, "served", True)
    )


def last_sent() -> Subquery:
    """When the agent last sent a message (one step down the sender index)."""
    return Subquery(
        Message.objects.filter(sender=OuterRef("pk"))
        .order_by("-created_at")
        .values("created_at")[:1]
    )


def seen_by_traffic(agent: Agent) -> Agent:
    """An endpoint agent is seen when it calls or answers, not only when an inbox connects:
    its `last_seen_at` (in memory) becomes the later of the two. Needs `last_sent` annotated."""
    sent = getattr(agent, "last_sent", None)
    if sent is not None and (agent.last_seen_at is None or sent > agent.last_seen_at):
        agent.last_seen_at = sent
    return agent


def agent_board(*, limit: int = 500) -> list[AgentRow]:
    """Every agent (up to `limit`, by slug) with its live status, current work and the
    messages it sent and received in the last hour. A fixed number of queries."""
    agents = list(
        Agent.objects.prefetch_related("skills")
        .annotate(last_sent=last_sent(), served=Exists(Task.objects.filter(target=OuterRef("pk"))))
        .order_by("slug")[:limit]
    )
    ids = [a.pk for a in agents]
    open_tasks: dict[int, list[Task]] = {}
    for task in (
        Task.objects.filter(target_id__in=ids, state__in=WORKING_STATES)
        .select_related("caller")
        .order_by("-updated_at")[:2000]
    ):
        open_tasks.setdefault(task.target_id, []).append(task)
    since = timezone.now() - timedelta(hours=1)
    recent = Message.objects.filter(created_at__gte=since)
    sent = dict(
        recent.filter(sender_id__in=ids)
        .values("sender_id")
        .annotate(n=Count("pk"))
        .values_list("sender_id", "n")
    )
    received = dict(
        recent.filter(target_id__in=ids)
        .values("target_id")
        .annotate(n=Count("pk"))
        .values_list("target_id", "n")
    )
    rows = []
    for agent in agents:
        caller = only_calls(agent)
        seen_by_traffic(agent)
        mine = open_tasks.get(agent.pk, [])
        rows.append(
            AgentRow(
                agent=agent,
                status=CALLER if caller else effective_status(agent, busy=bool(mine)),
                mode=CALLER if caller else agent.delivery_mode,
                skills=[s.skill_id for s in agent.skills.all()],
                working_on=mine[:3],
                open_tasks=len(mine),
                sent_hour=sent.get(agent.pk, 0),
                received_hour=received.get(agent.pk, 0),
            )
        )
    return rows
