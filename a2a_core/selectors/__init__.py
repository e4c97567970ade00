"""Reads used by views, the A2A endpoints and the CLI."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Exists, OuterRef, Prefetch, Q, QuerySet

from a2a_core.errors import FieldProblem, NotFound, ValidationFailed
from a2a_core.models import (
    ACTIVE_STATES,
    Agent,
    AgentStatus,
    Skill,
    SkillTag,
    Task,
)
from a2a_core.tokens import token_hash

DISCOVERY_MAX_LIMIT = 200


def agent_get(*, slug: str) -> Agent:
    try:
        return Agent.objects.get(slug=slug)
    except Agent.DoesNotExist:
        raise NotFound(f"no agent {slug!r} is registered") from None


def agent_by_token(*, token: str) -> Agent | None:
    """The agent a bearer token belongs to, or None for an unknown (or rotated) token."""
    if not token:
        return None
    return Agent.objects.filter(token_hash=token_hash(token)).first()


def _busy() -> Exists:
    return Exists(Task.objects.filter(target=OuterRef("pk"), state__in=list(ACTIVE_STATES)))


def effective_status(agent: Agent, *, busy: bool) -> str:
    """What an agent is doing now: a connected/reachable agent is busy while it has work."""
    if agent.status == AgentStatus.ONLINE:
        return AgentStatus.BUSY if busy else AgentStatus.IDLE
    return agent.status


@dataclass(frozen=True)
class DiscoveryPage:
    # Agents as discovery shows them to peers (see `agent_summary`), ordered by slug.
    agents: list[dict[str, Any]]
    next_cursor: str


_SUMMARY_FIELDS = (
    "id",
    "slug",
    "name",
    "role",
    "description",
    "status",
    "delivery_mode",
    "card_version",
    "last_seen_at",
    "busy",
)


def agent_discover(
    *,
    skill: str | None = None,
    tag: str | None = None,
    status: str | None = None,
    q: str | None = None,
    limit: int = 50,
    cursor: str | None = None,
) -> DiscoveryPage:
    """Agents matching every filter given, ordered by slug, a page at a time.

    `skill` is a skill id, `tag` a skill tag (case-insensitive), `status` one of the agent
    statuses (`busy`/`idle` are derived from work in flight), `q` free text over names,
    descriptions and skills. `cursor` is the `next_cursor` of the previous page. Reads plain
    values (two queries, no model instances): discovery is on agents' hot path.
    """
    problems = []
    if status is not None and status not in AgentStatus.values:
        problems.append(FieldProblem("status", f"must be one of {AgentStatus.values}"))
    if not 1 <= limit <= DISCOVERY_MAX_LIMIT:
        problems.append(FieldProblem("limit", f"must be between 1 and {DISCOVERY_MAX_LIMIT}"))
    texts = {"skill": skill, "tag": tag, "q": q, "cursor": cursor}
    problems += [
        FieldProblem(name, "may not contain U+0000 (NUL)")
        for name, text in texts.items()
        if text and "\x00" in text  # PostgreSQL refuses it in a query, not only in storage
    ]
    if problems:
        raise ValidationFailed("invalid discovery query", problems)

    agents: QuerySet[Agent] = Agent.objects.annotate(busy=_busy())
    if skill:
        agents = agents.filter(pk__in=Skill.objects.filter(skill_id=skill).values("agent_id"))
    if tag:
        agents = agents.filter(pk__in=SkillTag.objects.filter(tag=tag.lower()).values("agent_id"))
    if status in (AgentStatus.BUSY, AgentStatus.IDLE):
        agents = agents.filter(
            Q(status=status) | Q(status=AgentStatus.ONLINE, busy=status == AgentStatus.BUSY)
        )
    elif status:
        agents = agents.filter(status=status)
    if q:
        text = q.strip()
        skill_text = Q(name__icontains=text) | Q(description__icontains=text)
        agents = agents.filter(
            Q(slug__icontains=text)
            | Q(name__icontains=text)
            | Q(description__icontains=text)
            | Q(role__icontains=text)
            | Q(pk__in=Skill.objects.filter(skill_text).values("agent_id"))
            | Q(pk__in=SkillTag.objects.filter(tag=text.lower()).values("agent_id"))
        )
    if cursor:
        agents = agents.filter(slug__gt=cursor)
    rows = list(agents.order_by("slug").values(*_SUMMARY_FIELDS)[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    skills: dict[int, list[dict[str, Any]]] = {row["id"]: [] for row in rows}
    for agent_id, skill_id, name, tags in (
        Skill.objects.filter(agent_id__in=list(skills))
        .order_by("agent_id", "skill_id")
        .values_list("agent_id", "skill_id", "name", "tags")
    ):
        skills[agent_id].append({"id": skill_id, "name": name, "tags": tags})
    return DiscoveryPage(
        agents=[_summary(row, skills[row["id"]]) for row in rows],
        next_cursor=rows[-1]["slug"] if more else "",
    )


def _summary(row: dict[str, Any], skills: list[dict[str, Any]]) -> dict[str, Any]:
    status = row["status"]
    if status == AgentStatus.ONLINE:
        status = AgentStatus.BUSY if row["busy"] else AgentStatus.IDLE
    return {
        "slug": row["slug"],
        "name": row["name"],
        "role": row["role"],
        "description": row["description"],
        "status": status,
        "deliveryMode": row["delivery_mode"],
        "version": row["card_version"],
        "lastSeen": row["last_seen_at"].isoformat() if row["last_seen_at"] else None,
        "skills": skills,
    }


def agent_summary(agent: Agent) -> dict[str, Any]:
    """An agent as discovery shows it to other agents."""
    row = {field: getattr(agent, field, None) for field in _SUMMARY_FIELDS}
    row["busy"] = bool(getattr(agent, "busy", False))
    skills = [{"id": s.skill_id, "name": s.name, "tags": s.tags} for s in agent.skills.all()]
    return _summary(row, skills)


def agent_list() -> list[Agent]:
    return list(
        Agent.objects.annotate(busy=_busy()).prefetch_related(
            Prefetch("skills", queryset=Skill.objects.order_by("skill_id"))
        )
    )


# --- tasks as agents see them -------------------------------------------------------------


def task_visible(*, task_id: str, agent: Agent, target: Agent | None) -> Task:
    """A task the agent is a party to (its caller or its target), at `target`'s endpoint
    (any endpoint when `target` is None, i.e. the hub's own). Anything else is not found —
    whether it exists or not is nobody else's business."""
    tasks = Task.objects.filter(pk=task_id).filter(Q(caller=agent) | Q(target=agent))
    if target is not None:
        tasks = tasks.filter(Q(addressed_to=target) | Q(target=target))
    task = tasks.first()
    if task is None:
        raise NotFound(f"task {task_id} not found")
    return task


@dataclass(frozen=True)
class TaskPage:
    tasks: list[Task]
    next_page_token: str
    total_size: int


def _encode_cursor(task: Task) -> str:
    raw = f"{task.status_timestamp.isoformat()}|{task.pk}"
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _decode_cursor(token: str) -> tuple[datetime, str]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
        moment, task_id = raw.split("|", 1)
        return datetime.fromisoformat(moment), task_id
    except (ValueError, UnicodeDecodeError):
        raise ValidationFailed(
            "invalid page token",
            [FieldProblem("pageToken", "not a token this hub issued; start again without it")],
        ) from None


def task_list(
    *,
    agent: Agent,
    target: Agent | None,
    context_id: str = "",
    state: str = "",
    updated_after: datetime | None = None,
    page_size: int = 50,
    page_token: str = "",
) -> TaskPage:
    """The tasks an agent is a party to, most recently updated first (A2A ListTasks)."""
    tasks = Task.objects.filter(Q(caller=agent) | Q(target=agent))
    if target is not None:
        tasks = tasks.filter(Q(addressed_to=target) | Q(target=target))
    if context_id:
        tasks = tasks.filter(context_id=context_id)
    if state:
        tasks = tasks.filter(state=state)
    if updated_after is not None:
        tasks = tasks.filter(status_timestamp__gt=updated_after)
    total = tasks.count()
    if page_token:
        moment, task_id = _decode_cursor(page_token)
        tasks = tasks.filter(
            Q(status_timestamp__lt=moment) | Q(status_timestamp=moment, pk__lt=task_id)
        )
    page = list(tasks.order_by("-status_timestamp", "-pk")[: page_size + 1])
    more = len(page) > page_size
    page = page[:page_size]
    return TaskPage(
        tasks=page,
        next_page_token=_encode_cursor(page[-1]) if more else "",
        total_size=total,
    )
