"""Accepting a message into the hub: validate it, judge it, place it in a task, record it."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from a2a_core import agent_cache, timeline
from a2a_core.errors import (
    FieldProblem,
    HubError,
    IllegalTransition,
    NotFound,
    PolicyRejected,
    ValidationFailed,
)
from a2a_core.events import publish_traffic_on_commit
from a2a_core.models import (
    TERMINAL_STATES,
    Agent,
    Decision,
    Delivery,
    DeliveryMode,
    DeliveryState,
    Direction,
    Message,
    Task,
    TaskState,
)
from a2a_core.models.task import new_id
from a2a_core.policy.decide import Facts
from a2a_core.schemas.a2a import HUB_METADATA, envelope_part_indexes, hub_metadata
from a2a_core.schemas.events import TrafficItem
from a2a_core.selectors.task_wire import message_view, task_view
from a2a_core.services.classify import classify, message_item, message_row
from a2a_core.services.digest import message_digest
from a2a_core.services.escalations import escalation_hold
from a2a_core.services.inbox import inbox_enqueue
from a2a_core.services.judge import Judged, judge
from a2a_core.services.questions import withdraw_questions
from a2a_core.services.rows import insert_returning_pks, insert_rows, new_row
from a2a_core.services.task_states import task_item, task_set_state

MAX_TIMEOUT_SECONDS = 3600
_TRACE_ID = re.compile(r"^[0-9a-f]{32}$")


@dataclass(frozen=True)
class Accepted:
    """A message the hub has committed, and what it needs to deliver it."""

    task_id: str
    context_id: str
    state: str
    created: bool
    # The same caller sent the same messageId to the same target with the same content before
    # (see `message_digest`): nothing new was recorded.
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
    # The coordinator's decision: deliver, redirect (to `deliver_to`) or hold (for a human).
    decision: str = Decision.DELIVER
    reason: str = "ok"
    deliver_to: str = ""
    skill: str = ""
    # The target's breaker is counting failures or open: report how the call goes.
    watch_breaker: bool = False


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
    task = Task.objects.select_for_update().filter(pk=task_id, addressed_to=target).first()
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
    """One message on its way in: checked, placed in a task, about to be judged."""

    index: int
    item: Inbound
    timeout: float
    kind: str
    envelope: dict[str, Any] | None
    summary: str
    hub: dict[str, Any]
    task: Task
    created: bool
    remote_context_id: str
    facts: Facts
    digest: str
    row: Message | None = None
    judged: Judged | None = None

    def inbox_deadline(self, now: datetime) -> datetime | None:
        """An inbox agent's task has a deadline only when the caller asked for one: an
        envelope `deadline`, `timeoutSeconds`, or a `request` that expects a response (seed
        004: 30 s by default). Past it, the task fails and a late answer is flagged."""
        envelope = self.envelope or {}
        if envelope.get("deadline"):
            return parse_datetime(str(envelope["deadline"]))
        if "timeoutSeconds" in self.hub or (
            self.kind == "request" and envelope.get("expectsResponse")
        ):
            return now + timedelta(seconds=self.timeout)
        return None


def _accepted(
    task: Task,
    message: Message | tuple[Any, ...],
    *,
    timeout: float,
    created: bool = False,
    duplicate: bool = False,
    caller: Agent | None = None,
    remote_context_id: str = "",
    decision: str = Decision.DELIVER,
    reason: str = "ok",
    watch_breaker: bool = False,
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
        decision=decision,
        reason=reason,
        deliver_to=task.target.slug if task.target_id else "",
        skill=task.skill,
        watch_breaker=watch_breaker,
    )


def _place(item: Inbound, now: Any, timeout: float, hub: dict[str, Any]) -> tuple[Task, bool, str]:
    """The task a message goes to: the one it continues, or a new one (not saved yet)."""
    caller, target, message = item.caller, item.target, item.message
    if message.get("taskId"):
        task = _continued_task(message, caller, target)
        task.deadline = now + timedelta(seconds=timeout)
        return task, False, task.remote_context_id or task.context_id
    parent = _parent(str(hub.get("parentTaskId") or item.parent_hint or ""), caller)
    context_id = str(message.get("contextId") or new_id())
    remote_context_id = (
        _remote_context(context_id, target) if message.get("contextId") else context_id
    )
    task = new_row(
        Task,
        context_id=context_id,
        state=TaskState.SUBMITTED,
        status_timestamp=now,
        caller=caller,
        target=target,
        addressed_to=target,
        skill=_skill(hub, target),
        parent=parent,
        root_id=(parent.root_id or parent.pk) if parent else None,
        depth=parent.depth + 1 if parent else 0,
        path=[*(parent.path if parent else [caller.slug]), target.slug],
        trace_id=(parent.trace_id if parent else "")
        or trace_id_from(item.traceparent)
        or new_id().replace("-", ""),
        deadline=now + timedelta(seconds=timeout),
    )
    return task, True, remote_context_id


def _facts(plan_item: Inbound, task: Task, created: bool, kind: str, envelope: Any) -> Facts:
    chain = tuple(task.path[:-1]) if task.path else (plan_item.caller.slug,)
    return Facts(
        caller=plan_item.caller.slug,
        target=plan_item.target.slug,
        kind=kind,
        skill=task.skill,
        priority=str((envelope or {}).get("priority", "normal")),
        chain=chain,
        new_task=created,
    )


def _resumes_inbox_task(plan: _Plan) -> bool:
    """A caller answering an inbox agent's question: the hub, serving the task on the agent's
    behalf, moves it back to working (the agent gets the answer as a delivery)."""
    return (
        not plan.created
        and plan.task.state == TaskState.INPUT_REQUIRED
        and plan.task.target.delivery_mode == DeliveryMode.INBOX
    )


def _row(plan: _Plan, task: Task | None, judged: Judged) -> Message:
    decision = judged.decision
    item = plan.item
    redirected = decision.action == "redirect"
    return message_row(
        item.message,
        role="user",
        direction=Direction.REQUEST,
        task=task if task is not None else plan.task,
        kind=plan.kind,
        envelope=plan.envelope,
        summary=plan.summary,
        sender=item.caller,
        target=item.target,
        digest=plan.digest,
        request_metadata=item.request_metadata,
        recipients=[item.target.slug],
        correlation_id=str(
            (plan.envelope or {}).get("correlationId") or plan.hub.get("correlationId") or ""
        )[:128],
        decision=decision.action,
        decision_reason=decision.reason,
        decision_detail=decision.detail,
        decision_latency_us=judged.latency_us,
        redirected_to=agent_cache.agent_by_slug(decision.target) if redirected else None,
        delivery_state={
            "reject": DeliveryState.REJECTED,
            "hold": DeliveryState.HELD,
        }.get(decision.action, DeliveryState.PENDING),
    )


def _refusal(plan: _Plan, judged: Judged) -> PolicyRejected:
    decision = judged.decision
    return PolicyRejected(
        f"refused by the hub's policy: {decision.detail}",
        reason=decision.reason,
        retry_after=decision.retry_after,
        details={"policyVersion": judged.policy_version},
    )


def accept_batch(
    items: Sequence[Inbound], *, find_duplicates: bool = True
) -> list[Accepted | HubError]:
    """Accept messages, inside the caller's transaction (the group commit of
    `a2a_core.services.writes`).

    A message with a `taskId` continues that task (the caller must be the task's caller, its
    context must match and it must not be terminal); without one a new task is created with a
    server-generated id. A call made while the caller works on task T (T given as
    `metadata.a2aHub.parentTaskId` or the `A2A-Hub-Parent-Task` header) becomes a child of T.
    Each message is checked, placed in a task and judged by the coordinator in order; every
    message is recorded with the decision, including those it refuses (their callers get a
    `PolicyRejected`). A retry — the same caller, messageId, target and content as a message
    accepted before (the same `message_digest`) — records nothing and is `duplicate`, with the
    first message's task; a reused messageId with another target, taskId or content is a new
    message. With `find_duplicates` off, a retry is left to the unique constraint: the insert
    fails with IntegrityError and the caller replays the batch with it on.
    """
    results: list[Accepted | HubError | None] = [None] * len(items)
    now = timezone.now()
    earlier = _earlier(items) if find_duplicates else {}
    earlier_tasks = Task.objects.in_bulk([found[4] for found in earlier.values()])

    plans: list[_Plan] = []
    first_in_batch: dict[tuple[int, str, str], _Plan] = {}
    repeats: list[tuple[int, _Plan, float]] = []
    for i, item in enumerate(items):
        try:
            _check_parts(item.message)
            kind, envelope, summary = classify(item.message, default_kind="request")
            _check_sender(envelope, item.message, item.caller)
            hub = hub_metadata(item.message.get("metadata"), item.request_metadata)
            timeout = _timeout(hub)
            digest = message_digest(item.message, target_pk=item.target.pk)
            key = (item.caller.pk, str(item.message["messageId"]), digest)
            if key in earlier:
                found = earlier[key]
                results[i] = _accepted(
                    earlier_tasks[found[4]], found, timeout=timeout, duplicate=True
                )
                continue
            if key in first_in_batch:
                repeats.append((i, first_in_batch[key], timeout))
                continue
            task, created, remote_context_id = _place(item, now, timeout, hub)
        except HubError as exc:
            results[i] = exc
            continue
        plan = _Plan(
            i,
            item,
            timeout,
            kind,
            envelope,
            summary,
            hub,
            task,
            created,
            remote_context_id,
            _facts(item, task, created, kind, envelope),
            digest,
        )
        plans.append(plan)
        first_in_batch[key] = plan

    verdicts = judge([p.facts for p in plans], [p.item.caller.pk for p in plans])
    timeline.mark_batch("decide")
    for plan, judged in zip(plans, verdicts, strict=True):
        plan.judged = judged
        action = judged.decision.action
        if action == "redirect" and plan.created:
            other = agent_cache.agent_by_slug(judged.decision.target)
            assert other is not None
            plan.task.target = other
            plan.task.path = [*plan.task.path[:-1], other.slug]
        keep_task = action != "reject" or not plan.created
        plan.row = _row(plan, plan.task if keep_task else None, judged)
        if not keep_task:
            plan.row.task = None

    for p in plans:
        if p.task.target.delivery_mode == DeliveryMode.INBOX:
            p.task.deadline = p.inbox_deadline(now)
    insert_rows(
        [p.task for p in plans if p.created and p.judged and p.judged.decision.action != "reject"]
    )
    for p in plans:
        if not p.created and p.judged and p.judged.decision.action != "reject":
            p.task.save(update_fields=["deadline", "updated_at"])
    insert_returning_pks([p.row for p in plans if p.row is not None])
    inbox_enqueue(
        [
            Delivery(
                message=p.row,
                recipient=p.task.target,
                task=p.task,
                decision=p.judged.decision.action,
                decision_reason=p.judged.decision.reason,
            )
            for p in plans
            if p.row is not None
            and p.judged is not None
            and p.judged.decision.delivers
            and p.task.target.delivery_mode == DeliveryMode.INBOX
        ]
    )

    items_out: list[TrafficItem] = []
    tasks_out: dict[str, int] = {}
    for p in plans:
        assert p.row is not None and p.judged is not None
        decision = p.judged.decision
        items_out.append(message_item(p.row, p.row.task))
        if decision.action == "reject":
            results[p.index] = _refusal(p, p.judged)
            continue
        if decision.action == "hold":
            escalation_hold(task=p.task, message=p.row, decision=decision, caller=p.item.caller)
        elif _resumes_inbox_task(p):
            task_set_state(p.task, TaskState.WORKING)
            withdraw_questions(p.task)
        items_out.append(task_item(p.task, "created" if p.created else "updated"))
        tasks_out[p.task.pk] = p.task.event_seq
        results[p.index] = _accepted(
            p.task,
            p.row,
            timeout=p.timeout,
            created=p.created,
            caller=p.item.caller,
            remote_context_id=p.remote_context_id,
            decision=decision.action,
            reason=decision.reason,
            watch_breaker=p.judged.watch_breaker,
        )
    publish_traffic_on_commit(items_out, tasks_out)
    for i, first, timeout in repeats:
        if isinstance(results[first.index], HubError):
            results[i] = results[first.index]
        else:
            assert first.row is not None
            results[i] = _accepted(first.task, first.row, timeout=timeout, duplicate=True)
    return [r for r in results if r is not None]


def _earlier(items: Sequence[Inbound]) -> dict[tuple[int, str, str], tuple[Any, ...]]:
    """Messages these items repeat (same sender, messageId and digest), by (sender pk,
    messageId, digest)."""
    keys = {
        (
            item.caller.pk,
            str(item.message.get("messageId")),
            message_digest(item.message, target_pk=item.target.pk),
        )
        for item in items
        if item.message.get("messageId")
    }
    if not keys:
        return {}
    earlier = {}
    for found in (
        Message.objects.filter(
            direction=Direction.REQUEST,
            sender_id__in={k[0] for k in keys},
            message_id__in={k[1] for k in keys},
            digest__in={k[2] for k in keys},
        )
        .exclude(decision=Decision.REJECT)
        .values_list(
            "pk", "created_at", "kind", "envelope", "task_id", "sender_id", "message_id", "digest"
        )
    ):
        if (found[5], found[6], found[7]) in keys and found[4] is not None:
            earlier[(found[5], found[6], found[7])] = found
    return earlier


def request_answered_by(*, caller: Agent, target: Agent, message: dict[str, Any]) -> str | None:
    """The task of the request a `response` message answers (seed 004 `sendA2AResponse`): a
    request from `target` to `caller` with the response's correlationId. None when the message
    is not a response, or answers nothing the hub saw."""
    indexes = envelope_part_indexes(message)
    if not indexes:
        return None
    data = message["parts"][indexes[0]].get("data")
    if not isinstance(data, dict) or data.get("kind") != "response":
        return None
    correlation_id = str(data.get("correlationId") or "")
    if not correlation_id:
        return None
    found: str | None = (
        Message.objects.filter(
            direction=Direction.REQUEST,
            sender=target,
            target=caller,
            correlation_id=correlation_id[:128],
            task__isnull=False,
        )
        .order_by("-pk")
        .values_list("task_id", flat=True)
        .first()
    )
    return found


def message_duplicate_view(*, task_id: str, history_length: int | None) -> dict[str, Any]:
    task = Task.objects.get(pk=task_id)
    return task_view(task, history_length=history_length)


def message_retry_answer(
    *, task_id: str, request_pk: int, history_length: int | None
) -> tuple[str, dict[str, Any]]:
    """What a retry of a request gets back: ("message", the Message the endpoint agent
    answered it with, exactly as the first call returned it), or ("task", the task as it is
    now, `message_duplicate_view`)."""
    task = Task.objects.get(pk=task_id)
    direct = Message.objects.filter(
        task=task, direction=Direction.REPLY, in_reply_to_id=request_pk
    ).first()
    if direct is None:
        return "task", task_view(task, history_length=history_length)
    view = message_view(direct, task)
    del view["taskId"]
    return "message", view


def queued_delivery(message: Message, task: Task) -> tuple[Accepted, dict[str, Any]]:
    """What delivering a queued (approved or redirected) message needs: its Accepted (with
    the human's decision and its reason), and the message as the caller sent it (A2A
    ProtoJSON, the hub's ids)."""
    caller = task.caller
    accepted = _accepted(
        task,
        message,
        timeout=float(settings.HUB_FORWARD_TIMEOUT),
        caller=caller,
        decision=message.decision or Decision.DELIVER,
        reason=message.decision_reason or "ok",
    )
    wire: dict[str, Any] = {
        "messageId": message.message_id,
        "role": "ROLE_USER",
        "parts": message.parts,
        "contextId": task.context_id,
    }
    if message.metadata:
        wire["metadata"] = message.metadata
    if message.extensions:
        wire["extensions"] = message.extensions
    return accepted, wire
