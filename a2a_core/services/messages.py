"""Accepting a message into the hub: validate it, place it in a task, record it."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from a2a_core.errors import FieldProblem, HubError, IllegalTransition, NotFound, ValidationFailed
from a2a_core.events import publish_traffic_on_commit
from a2a_core.models import (
    TERMINAL_STATES,
    Agent,
    Decision,
    DeliveryState,
    Direction,
    Message,
    Task,
    TaskState,
)
from a2a_core.models.task import new_id
from a2a_core.schemas.a2a import (
    HUB_METADATA,
    envelope_part_indexes,
    hub_metadata,
    without_hub_metadata,
)
from a2a_core.services.classify import classify, message_item
from a2a_core.services.rows import insert_rows
from a2a_core.services.tasks import task_item, task_view

MAX_TIMEOUT_SECONDS = 3600
_TRACE_ID = re.compile(r"^[0-9a-f]{32}$")


@dataclass(frozen=True)
class Accepted:
    """A message the hub has committed, and what it needs to deliver it."""

    task_id: str
    context_id: str
    state: str
    created: bool
    # The same messageId from the same caller was accepted before: nothing new was recorded.
    duplicate: bool
    message_pk: int
    message_created_at: datetime
    kind: str
    envelope: dict[str, Any] | None
    trace_id: str
    depth: int
    timeout: float
    # What changes when the message goes on to an endpoint agent: the agent's own ids, and
    # the hub's fields in its metadata (see `a2a_core.delivery.dispatch.forwarded`).
    remote_task_id: str
    remote_context_id: str
    hub_fields: dict[str, Any]


def trace_id_from(traceparent: str | None) -> str:
    """The trace id of a W3C `traceparent` header, or '' if it is absent or malformed."""
    if not traceparent:
        return ""
    pieces = traceparent.strip().split("-")
    if len(pieces) == 4 and _TRACE_ID.match(pieces[1]) and pieces[1] != "0" * 32:
        return pieces[1]
    return ""


def _timeout(hub: dict[str, Any]) -> float:
    value = hub.get("timeoutSeconds")
    if value is None:
        return float(settings.HUB_FORWARD_TIMEOUT)
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 < value <= MAX_TIMEOUT_SECONDS
    ):
        raise ValidationFailed(
            "invalid timeout",
            [
                FieldProblem(
                    f"metadata.{HUB_METADATA}.timeoutSeconds",
                    f"must be a number of seconds in (0, {MAX_TIMEOUT_SECONDS}], got {value!r}",
                )
            ],
        )
    return float(value)


def _check_parts(message: dict[str, Any]) -> None:
    parts = message.get("parts") or []
    if len(parts) > settings.HUB_MAX_PARTS:
        raise ValidationFailed(
            "too many parts",
            [
                FieldProblem(
                    "message.parts",
                    f"the message has {len(parts)} parts; the limit is {settings.HUB_MAX_PARTS}",
                )
            ],
        )


def _check_sender(envelope: dict[str, Any] | None, message: dict[str, Any], caller: Agent) -> None:
    claimed = ((envelope or {}).get("from") or {}).get("agentId")
    if claimed and claimed != caller.slug:
        index = envelope_part_indexes(message)[0]
        raise ValidationFailed(
            "the envelope's sender is not the caller",
            [
                FieldProblem(
                    f"message.parts[{index}].data.from.agentId",
                    f"says {claimed!r} but the bearer token belongs to {caller.slug!r}",
                )
            ],
        )


def _parent(parent_id: str, caller: Agent) -> Task | None:
    if not parent_id:
        return None
    parent = Task.objects.filter(pk=parent_id).first()
    if parent is None or parent.target_id != caller.pk:
        raise ValidationFailed(
            "invalid delegation",
            [
                FieldProblem(
                    f"metadata.{HUB_METADATA}.parentTaskId",
                    f"task {parent_id} is not a task {caller.slug} is working on",
                )
            ],
        )
    return parent


def _remote_context(context_id: str, target: Agent) -> str:
    """The context id the target agent knows this conversation by (usually the same)."""
    known = (
        Task.objects.filter(context_id=context_id, target=target)
        .exclude(remote_context_id="")
        .order_by("-created_at")
        .values_list("remote_context_id", flat=True)
        .first()
    )
    return known or context_id


def _continued_task(message: dict[str, Any], caller: Agent, target: Agent) -> Task:
    task_id = str(message["taskId"])
    task = Task.objects.select_for_update().filter(pk=task_id, target=target).first()
    if task is None or task.caller_id != caller.pk:
        raise NotFound(f"task {task_id} not found")
    context_id = message.get("contextId")
    if context_id and context_id != task.context_id:
        raise ValidationFailed(
            "contextId does not match the task",
            [
                FieldProblem(
                    "message.contextId",
                    f"{context_id!r} is not the context of task {task.pk} ({task.context_id!r})",
                )
            ],
        )
    if task.state in TERMINAL_STATES:
        raise IllegalTransition(
            f"task {task.pk} is {task.state}; a task in a terminal state accepts no more messages",
            details={"taskId": task.pk, "state": task.state},
        )
    return task


def _skill(hub: dict[str, Any], target: Agent) -> str:
    if skill := hub.get("skill"):
        return str(skill)[:200]
    skills = getattr(target, "skill_ids", None)
    if skills is None:
        skills = list(target.skills.values_list("skill_id", flat=True)[:2])
    return skills[0] if len(skills) == 1 else ""


def _hub_fields(task: Task, caller: Agent) -> dict[str, Any]:
    """What the hub tells an endpoint agent about the task it forwards (metadata.a2aHub)."""
    return {
        "taskId": task.pk,
        "contextId": task.context_id,
        "caller": caller.slug,
        "rootTaskId": task.root_id or task.pk,
        "hop": task.depth + 1,
        "traceId": task.trace_id,
    }


@dataclass(frozen=True)
class Inbound:
    """One message as the gate received it: who sent it to whom, and what it says."""

    caller: Agent
    target: Agent
    message: dict[str, Any]
    request_metadata: dict[str, Any] = field(default_factory=dict)
    parent_hint: str = ""
    traceparent: str = ""


@dataclass
class _Plan:
    index: int
    item: Inbound
    task: Task
    row: Message
    created: bool
    timeout: float
    remote_context_id: str


def _accepted(
    task: Task,
    message: Message | tuple[Any, ...],
    *,
    timeout: float,
    created: bool = False,
    duplicate: bool = False,
    caller: Agent | None = None,
    remote_context_id: str = "",
) -> Accepted:
    """What the dispatcher needs about an accepted message: from its row, or from the
    (pk, created_at, kind, envelope) of an earlier copy when this one is a retry."""
    if isinstance(message, Message):
        pk, created_at, kind, envelope = (
            message.pk,
            message.created_at,
            message.kind,
            message.envelope,
        )
    else:
        pk, created_at, kind, envelope = message[:4]
    return Accepted(
        task_id=task.pk,
        context_id=task.context_id,
        state=task.state,
        created=created,
        duplicate=duplicate,
        message_pk=pk,
        message_created_at=created_at,
        kind=kind,
        envelope=envelope,
        trace_id=task.trace_id,
        depth=task.depth,
        timeout=timeout,
        remote_task_id=task.remote_task_id,
        remote_context_id=remote_context_id or task.remote_context_id or task.context_id,
        hub_fields=_hub_fields(task, caller) if caller is not None else {},
    )


def _plan(
    item: Inbound, now: Any, timeout: float, kind: str, envelope: Any, summary: str
) -> tuple[Task, Message, bool, str]:
    """The task and message rows for one accepted message (unsaved, except a continued task)."""
    caller, target, message = item.caller, item.target, item.message
    hub = hub_metadata(message.get("metadata"), item.request_metadata)
    if message.get("taskId"):
        task = _continued_task(message, caller, target)
        created = False
        remote_context_id = task.remote_context_id or task.context_id
        task.deadline = now + timedelta(seconds=timeout)
    else:
        parent = _parent(str(hub.get("parentTaskId") or item.parent_hint or ""), caller)
        context_id = str(message.get("contextId") or new_id())
        remote_context_id = (
            _remote_context(context_id, target) if message.get("contextId") else context_id
        )
        task = Task(
            context_id=context_id,
            state=TaskState.SUBMITTED,
            status_timestamp=now,
            caller=caller,
            target=target,
            skill=_skill(hub, target),
            parent=parent,
            root_id=(parent.root_id or parent.pk) if parent else None,
            depth=parent.depth + 1 if parent else 0,
            trace_id=(parent.trace_id if parent else "")
            or trace_id_from(item.traceparent)
            or new_id().replace("-", ""),
            deadline=now + timedelta(seconds=timeout),
        )
        created = True
    row = Message(
        message_id=str(message["messageId"]),
        role="user",
        parts=message.get("parts") or [],
        metadata=without_hub_metadata(message.get("metadata")),
        extensions=message.get("extensions") or [],
        reference_task_ids=message.get("referenceTaskIds") or [],
        direction=Direction.REQUEST,
        kind=kind,
        envelope=envelope,
        summary=summary,
        sender=caller,
        target=target,
        recipients=[target.slug],
        task=task,
        context_id=task.context_id,
        correlation_id=str((envelope or {}).get("correlationId") or hub.get("correlationId") or "")[
            :128
        ],
        hop=task.depth + 1,
        trace_id=task.trace_id,
        decision=Decision.DELIVER,
        delivery_state=DeliveryState.PENDING,
    )
    return task, row, created, remote_context_id


def accept_batch(
    items: Sequence[Inbound], *, find_duplicates: bool = True
) -> list[Accepted | HubError]:
    """Accept messages (call inside a transaction); see `messages_accept`.

    With `find_duplicates` off, a retried messageId is left to the unique constraint: the
    insert fails with IntegrityError and the caller replays the batch with it on.
    """
    results: list[Accepted | HubError | None] = [None] * len(items)
    checked: list[tuple[int, Inbound, float, str, Any, str]] = []
    for i, item in enumerate(items):
        try:
            _check_parts(item.message)
            kind, envelope, summary = classify(item.message, default_kind="request")
            _check_sender(envelope, item.message, item.caller)
            hub = hub_metadata(item.message.get("metadata"), item.request_metadata)
            checked.append((i, item, _timeout(hub), kind, envelope, summary))
        except HubError as exc:
            results[i] = exc

    keys = {(item.caller.pk, str(item.message["messageId"])) for _, item, *_ in checked}
    earlier: dict[tuple[int, str], tuple[Any, ...]] = {}
    if keys and find_duplicates:
        for found in Message.objects.filter(
            direction=Direction.REQUEST,
            sender_id__in={k[0] for k in keys},
            message_id__in={k[1] for k in keys},
        ).values_list("pk", "created_at", "kind", "envelope", "task_id", "sender_id", "message_id"):
            if (found[5], found[6]) in keys and found[4] is not None:
                earlier[(found[5], found[6])] = found
    earlier_tasks = Task.objects.in_bulk([found[4] for found in earlier.values()])

    now = timezone.now()
    plans: list[_Plan] = []
    first_in_batch: dict[tuple[int, str], _Plan] = {}
    repeats: list[tuple[int, _Plan, float]] = []
    for i, item, timeout, kind, envelope, summary in checked:
        key = (item.caller.pk, str(item.message["messageId"]))
        if key in earlier:
            results[i] = _accepted(
                earlier_tasks[earlier[key][4]], earlier[key], timeout=timeout, duplicate=True
            )
            continue
        if key in first_in_batch:
            repeats.append((i, first_in_batch[key], timeout))
            continue
        try:
            task, row, created, remote_context_id = _plan(
                item, now, timeout, kind, envelope, summary
            )
        except HubError as exc:
            results[i] = exc
            continue
        plan = _Plan(i, item, task, row, created, timeout, remote_context_id)
        plans.append(plan)
        first_in_batch[key] = plan

    insert_rows([p.task for p in plans if p.created])
    for p in plans:
        if not p.created:
            p.task.save(update_fields=["deadline", "updated_at"])
    Message.objects.bulk_create([p.row for p in plans])
    publish_traffic_on_commit(
        [
            item
            for p in plans
            for item in (
                message_item(p.row, p.task),
                task_item(p.task, "created" if p.created else "updated"),
            )
        ],
        {p.task.pk: p.task.event_seq for p in plans},
    )
    for p in plans:
        results[p.index] = _accepted(
            p.task,
            p.row,
            timeout=p.timeout,
            created=p.created,
            caller=p.item.caller,
            remote_context_id=p.remote_context_id,
        )
    for i, first, timeout in repeats:
        results[i] = _accepted(first.task, first.row, timeout=timeout, duplicate=True)
    return [r for r in results if r is not None]


def messages_accept(items: Sequence[Inbound]) -> list[Accepted | HubError]:
    """Accept several messages in one transaction (group commit); see `message_accept`.

    Returns, for each item in order, its `Accepted` or the `HubError` that refused it (nothing
    of a refused message is written). If two concurrent retries of one messageId race past
    the duplicate check, the batch is replayed one message at a time and the later retry
    finds the earlier one.
    """
    try:
        with transaction.atomic():
            return accept_batch(items)
    except IntegrityError:
        results: list[Accepted | HubError] = []
        for item in items:
            with transaction.atomic():
                results.extend(accept_batch([item]))
        return results


def message_accept(
    *,
    caller: Agent,
    target: Agent,
    message: dict[str, Any],
    request_metadata: dict[str, Any] | None = None,
    parent_hint: str = "",
    traceparent: str = "",
) -> Accepted:
    """Validate a caller's A2A message, place it in a task and commit it.

    A message with a `taskId` continues that task (the caller must be the task's caller,
    its context must match and it must not be terminal); without one a new task is created
    with a server-generated id. A call made while the caller works on task T (T given as
    `metadata.a2aHub.parentTaskId` or the `A2A-Hub-Parent-Task` header) becomes a child of T.
    Retrying the same `messageId` returns the first attempt's task without recording anything.
    Raises `ValidationFailed`, `NotFound` or `IllegalTransition`; nothing is written then.
    """
    item = Inbound(caller, target, message, request_metadata or {}, parent_hint, traceparent)
    [result] = messages_accept([item])
    if isinstance(result, HubError):
        raise result
    return result


def message_duplicate_view(*, task_id: str, history_length: int | None) -> dict[str, Any]:
    task = Task.objects.get(pk=task_id)
    return task_view(task, history_length=history_length)
