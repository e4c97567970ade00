"""Reads for the agents screens: who is there, what each is doing, how busy it has been."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from django.db.models import Count, Q
from django.utils import timezone

from a2a_core.models import Agent, Message, Task, TaskState
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


def agent_board(*, limit: int = 500) -> list[AgentRow]:
    """Every agent (up to `limit`, by slug) with its live status, current work and the
    messages it sent and received in the last hour. A fixed number of queries."""
    agents = list(Agent.objects.prefetch_related("skills").order_by("slug")[:limit])
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
        mine = open_tasks.get(agent.pk, [])
        rows.append(
            AgentRow(
                agent=agent,
                status=effective_status(agent, busy=bool(mine)),
                skills=[s.skill_id for s in agent.skills.all()],
                working_on=mine[:3],
                open_tasks=len(mine),
                sent_hour=sent.get(agent.pk, 0),
                received_hour=received.get(agent.pk, 0),
            )
        )
    return rows


def agent_tasks(*, agent: Agent, limit: int = 50) -> list[Task]:
    """The agent's most recent tasks, as caller or target."""
    return list(
        Task.objects.filter(Q(target=agent) | Q(caller=agent))
        .select_related("caller", "target")
        .order_by("-updated_at")[:limit]
    )
