"""Which endpoint agents' tasks the hub follows, and which server process follows each.

A task is followed while the hub has yet to learn how the agent ends it (see `TaskFollow`).
The process following it holds a lease it renews; when a process stops, its leases run out
and another process takes the tasks over (`follow_claim_due`). Tasks a stopped process was
still delivering are handed over the same way (`tasks_abandoned_follow`): the hub asks the
agent how they went before it says anything about them.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from a2a_core.models import (
    ACTIVE_STATES,
    Agent,
    DeliveryMode,
    Direction,
    Message,
    Task,
    TaskFollow,
)


def new_claim() -> str:
    return uuid.uuid4().hex


def follow_begin(*, task_id: str, claim: str, lease: timedelta) -> bool:
    """Follow the task under `claim`; False when another process holds a lease on it."""
    now = timezone.now()
    with transaction.atomic():
        TaskFollow.objects.bulk_create(
            [TaskFollow(task_id=task_id, lease_until=now)], ignore_conflicts=True
        )
        free = Q(claim="") | Q(claim=claim) | Q(lease_until__lte=now)
        taken = TaskFollow.objects.filter(free, task_id=task_id).update(
            claim=claim, lease_until=now + lease
        )
    return bool(taken)


def follow_renew(*, task_id: str, claim: str, lease: timedelta) -> bool:
    """Extend the lease; False when the claim was lost (another process took the task over)."""
    rows = TaskFollow.objects.filter(task_id=task_id, claim=claim)
    return bool(rows.update(lease_until=timezone.now() + lease))


def follow_end(*, task_id: str, claim: str) -> None:
    """The task needs no more following (it ended or needs input)."""
    TaskFollow.objects.filter(task_id=task_id, claim=claim).delete()


def follow_release(*, claims: dict[str, str]) -> None:
    """Hand the tasks (task id -> claim) to whichever process looks next (this one stops)."""
    for task_id, claim in claims.items():
        TaskFollow.objects.filter(task_id=task_id, claim=claim).update(
            claim="", lease_until=timezone.now()
        )


def follow_claim_due(*, limit: int, lease: timedelta, skip: set[str]) -> list[tuple[str, str]]:
    """Take over up to `limit` followed tasks nobody holds a lease on: (task id, claim) pairs.

    Each row goes to one process only: rows are locked with SKIP LOCKED where the database has
    it (SQLite's write lock serialises claims instead), and a claimed row's lease is extended
    before the transaction ends. `skip`: tasks this process already follows."""
    now = timezone.now()
    due = TaskFollow.objects.filter(lease_until__lte=now).exclude(task_id__in=skip)
    # A cheap read first: most polls find nothing, and SQLite would take its write lock.
    if not due.exists():
        return []
    claims: list[tuple[str, str]] = []
    with transaction.atomic():
        rows = due.order_by("lease_until")
        if connection.features.has_select_for_update_skip_locked:
            rows = rows.select_for_update(skip_locked=True)
        for task_id in list(rows.values_list("task_id", flat=True)[:limit]):
            claim = new_claim()
            TaskFollow.objects.filter(task_id=task_id).update(claim=claim, lease_until=now + lease)
            claims.append((task_id, claim))
    return claims


def tasks_abandoned_follow(*, now: datetime | None = None, limit: int = 200) -> int:
    """Hand over endpoint agents' tasks still submitted or working well past their deadline:
    the process forwarding them stopped (killed, crashed) before it could record an answer or
    a timeout. The hub then asks the agent how each went (see `a2a_core.delivery.follow`)."""
    now = now or timezone.now()
    stale = list(
        Task.objects.filter(
            deadline__lt=now - timedelta(seconds=settings.HUB_ABANDONED_GRACE_SECONDS),
            state__in=list(ACTIVE_STATES),
            target__delivery_mode=DeliveryMode.ENDPOINT,
            follow__isnull=True,
        )
        .order_by("deadline")
        .values_list("pk", flat=True)[:limit]
    )
    TaskFollow.objects.bulk_create(
        [TaskFollow(task_id=pk, lease_until=now) for pk in stale], ignore_conflicts=True
    )
    return len(stale)


@dataclass(frozen=True)
class Followed:
    """What following a task needs to know about it."""

    task_id: str
    state: str
    agent: Agent
    remote_task_id: str
    # Where the agent may know the task from when its id was never learned: the context ids
    # it was sent with, and the messageIds of its requests.
    context_ids: list[str]
    message_ids: list[str]
    # Remote ids of the hub's other tasks in those contexts (not this task's).
    known_remote_ids: set[str]
    deadline: datetime
    trace_id: str
    # Whether the agent keeps a task for what it receives, as far as its earlier answers at
    # the hub show: True when it has answered with tasks and never with a Message, False when
    # it has answered with a Message (no task), None when it has answered nothing yet.
    keeps_tasks: bool | None = None


# How many of an agent's latest answers say whether it keeps tasks (a bounded read).
RECENT_ANSWERS = 50


def _keeps_tasks(agent: Agent) -> bool | None:
    """What the agent's latest answers at the hub say about whether it keeps a task for what
    it receives (see `Followed.keeps_tasks`)."""
    replies = Message.objects.filter(sender=agent, direction=Direction.REPLY).order_by(
        "-created_at"
    )
    latest = list(replies.values_list("in_reply_to_id", flat=True)[:RECENT_ANSWERS])
    if any(request is not None for request in latest):
        return False
    tasks = Task.objects.filter(target=agent).order_by("-status_timestamp")
    remote_ids = tasks.values_list("remote_task_id", flat=True)[:RECENT_ANSWERS]
    return True if any(remote_ids) else None


def followed(*, task_id: str) -> Followed | None:
    """The task as a follower sees it; None if it no longer exists."""
    task = Task.objects.select_related("target").filter(pk=task_id).first()
    if task is None:
        return None
    context_ids = [c for c in [task.remote_context_id, task.context_id] if c]
    if not task.remote_task_id:
        context_ids.extend(
            Task.objects.filter(context_id=task.context_id, target_id=task.target_id)
            .exclude(remote_context_id="")
            .values_list("remote_context_id", flat=True)
            .distinct()
        )
    known: set[str] = set()
    message_ids: list[str] = []
    keeps_tasks: bool | None = None
    if not task.remote_task_id:
        keeps_tasks = _keeps_tasks(task.target)
        known = set(
            Task.objects.filter(target_id=task.target_id, remote_context_id__in=context_ids)
            .exclude(pk=task.pk)
            .exclude(remote_task_id="")
            .values_list("remote_task_id", flat=True)
        )
        message_ids = list(
            task.messages.filter(direction=Direction.REQUEST).values_list("message_id", flat=True)
        )
    deadline = task.deadline or task.created_at + timedelta(seconds=settings.HUB_FORWARD_TIMEOUT)
    return Followed(
        task_id=task.pk,
        state=task.state,
        agent=task.target,
        remote_task_id=task.remote_task_id,
        context_ids=list(dict.fromkeys(context_ids)),
        message_ids=message_ids,
        known_remote_ids=known,
        deadline=deadline,
        trace_id=task.trace_id,
        keeps_tasks=keeps_tasks,
    )
