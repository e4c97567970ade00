"""Accepting a message into the hub: validate it, judge it, place it in a task, record it."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from django.conf import settings
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from a2a_core import agent_cache, timeline
from a2a_core.errors import HubError, PolicyRejected
from a2a_core.events import publish_traffic_on_commit
from a2a_core.models import (
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
from a2a_core.policy.decide import Facts
from a2a_core.schemas.a2a import hub_metadata
from a2a_core.schemas.events import TrafficItem
from a2a_core.selectors.message_retries import EarlierCopy, RetryKey, message_earlier_copies
from a2a_core.services.classify import classify, message_item, message_row
from a2a_core.services.content import approved_parts, masked_summary, request_masked
from a2a_core.services.decisions import Decided, decide_batch, message_content
from a2a_core.services.digest import message_digest
from a2a_core.services.escalations import escalation_hold
from a2a_core.services.inbox import inbox_enqueue
from a2a_core.services.ledger import ledger_decisions
from a2a_core.services.message_checks import (
    message_parts_check,
    message_sender_check,
    message_timeout,
)
from a2a_core.services.message_placing import message_place
from a2a_core.services.questions import withdraw_questions
from a2a_core.services.task_states import task_item, task_set_state
from a2a_core.storage.rows import (
    insert_returning_pks,
    insert_rows,
    update_rows,
    written_together,
)


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
    # Who asked whom on this task's chain, the caller first and the target last.
    path: list[str]
    timeout: float
    # What changes when the message goes on to an endpoint agent: the agent's own ids, and
    # the hub's fields in its metadata (see `a2a_core.delivery.wire.forwarded`).
    remote_task_id: str
    remote_context_id: str
    hub_fields: dict[str, Any]
    # The policy's decision: deliver, redirect (to `deliver_to`) or hold (for a human).
    decision: str = Decision.DELIVER
    reason: str = "ok"
    deliver_to: str = ""
    skill: str = ""
    # The target's breaker is counting failures or open: report how the call goes.
    watch_breaker: bool = False
    # When the policy's decision was made (time.time_ns), and how long it took (µs):
    # `a2a_core.call_times`.
    judged_ns: int = 0
    judge_us: int = 0
    # Content rules redacted the message: its parts as the agent gets them.
    redacted_parts: list[dict[str, Any]] | None = None
    # Who stands behind the policy's decision ("policy v3 by alice"): `a2a_core.tracing`.
    decided_by: str = ""


def _hub_fields(task: Task, caller: Agent, replay: Any = None) -> dict[str, Any]:
    """What the hub tells an endpoint agent about the task it forwards (metadata.a2aHub);
    a replay says so (`replay`: the set and the task it replays)."""
    fields = {
        "taskId": task.pk,
        "contextId": task.context_id,
        "caller": caller.slug,
        "rootTaskId": task.root_id or task.pk,
        "hop": task.depth + 1,
        "traceId": task.trace_id,
    }
    if isinstance(replay, dict):
        fields["replay"] = replay
    return fields


@dataclass(frozen=True)
class Inbound:
    """One message as the gate received it: who sent it to whom, and what it says."""

    caller: Agent
    target: Agent
    message: dict[str, Any]
    request_metadata: dict[str, Any] = field(default_factory=dict)
    parent_hint: str = ""
    traceparent: str = ""
    # A trusted peer hub's delegation chain (`a2a_core.federation.peer_chain`).
    peer_chain: tuple[str, ...] = ()


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
    # Earlier copies whose tasks moved on (`message_earlier_copies`): this one is new work.
    repeat: int = 0
    row: Message | None = None
    judged: Decided | None = None
    judged_ns: int = 0

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
    message: Message | EarlierCopy,
    *,
    timeout: float,
    created: bool = False,
    duplicate: bool = False,
    caller: Agent | None = None,
    remote_context_id: str = "",
    decision: str = Decision.DELIVER,
    reason: str = "ok",
    watch_breaker: bool = False,
    replay: Any = None,
    judged_ns: int = 0,
    judge_us: int = 0,
    redacted_parts: list[dict[str, Any]] | None = None,
    decided_by: str = "",
) -> Accepted:
    """What the dispatcher needs about an accepted message: from its row, or from the earlier
    copy when this one is a retry."""
    return Accepted(
        task_id=task.pk,
        context_id=task.context_id,
        state=task.state,
        created=created,
        duplicate=duplicate,
        message_pk=message.pk,
        message_created_at=message.created_at,
        kind=message.kind,
        envelope=message.envelope,
        trace_id=task.trace_id,
        depth=task.depth,
        path=task.path,
        timeout=timeout,
        remote_task_id=task.remote_task_id,
        remote_context_id=remote_context_id or task.remote_context_id or task.context_id,
        hub_fields=_hub_fields(task, caller, replay) if caller is not None else {},
        decision=decision,
        reason=reason,
        deliver_to=task.target.slug if task.target_id else "",
        skill=task.skill,
        watch_breaker=watch_breaker,
        judged_ns=judged_ns,
        judge_us=judge_us,
        redacted_parts=redacted_parts,
        decided_by=decided_by,
    )


def _facts(plan_item: Inbound, task: Task, created: bool, kind: str, envelope: Any) -> Facts:
    chain = tuple(task.path[:-1]) if task.path else (plan_item.caller.slug,)
    content = message_content(
        plan_item.message,
        caller=plan_item.caller.slug,
        target=plan_item.target.slug,
        kind=kind,
        skill=task.skill,
    )
    return Facts(
        content=content,
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


def _row(plan: _Plan, task: Task | None, judged: Decided) -> Message:
    decision = judged.decision
    item = plan.item
    redirected = decision.action == "redirect"
    message, content = request_masked(item.message, decision)
    envelope, summary = plan.envelope, plan.summary
    if content:
        envelope, summary = masked_summary(message, plan.kind)
    return message_row(
        message,
        role="user",
        direction=Direction.REQUEST,
        task=task if task is not None else plan.task,
        kind=plan.kind,
        envelope=envelope,
        summary=summary,
        **content,
        sender=item.caller,
        target=item.target,
        digest=plan.digest,
        repeat=plan.repeat,
        request_metadata=item.request_metadata,
        recipients=[item.target.slug],
        correlation_id=str(
            (plan.envelope or {}).get("correlationId") or plan.hub.get("correlationId") or ""
        )[:128],
        decision=decision.action,
        decision_reason=decision.reason,
        decision_detail=decision.detail,
        decision_latency_us=judged.latency_us,
        decision_policy_version=judged.policy_version,
        redirected_to=agent_cache.agent_by_slug(decision.target) if redirected else None,
        delivery_state={
            "reject": DeliveryState.REJECTED,
            "hold": DeliveryState.HELD,
        }.get(decision.action, DeliveryState.PENDING),
    )


def _refusal(plan: _Plan, judged: Decided) -> PolicyRejected:
    decision = judged.decision
    return PolicyRejected(
        f"refused by the hub's policy: {decision.detail}",
        reason=decision.reason,
        retry_after=decision.retry_after,
        details={"policyVersion": judged.policy_version},
        decided_by=judged.decided_by,
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
    Each message is checked, placed in a task and judged by the policy in order; every
    message is recorded with the decision, including those it refuses (their callers get a
    `PolicyRejected`). A retry — the same caller, messageId, target and content as a message
    accepted before (the same `message_digest`) — records nothing and is `duplicate`, with the
    first message's task, unless the caller has moved that task on since (answered or canceled
    it: see `message_earlier_copies`); a reused messageId with another target, taskId or
    content is a new message. With `find_duplicates` off, a retry is left to the unique constraint: the insert
    fails with IntegrityError and the caller replays the batch with it on.
    """
    results: list[Accepted | HubError | None] = [None] * len(items)
    now = timezone.now()
    earlier = message_earlier_copies(keys=_retry_keys(items)) if find_duplicates else {}
    plans, repeats = _check_and_place(items, now, earlier, results)
    _judge(plans)
    _write(plans, now)
    _settle(plans, results)
    for repeat in repeats:
        first = results[repeat.first.index]
        if isinstance(first, HubError):
            results[repeat.position] = first
        else:
            assert repeat.first.row is not None
            results[repeat.position] = _accepted(
                repeat.first.task, repeat.first.row, timeout=repeat.timeout, duplicate=True
            )
    return [r for r in results if r is not None]


class _Repeat(NamedTuple):
    """A message sent twice in one batch: the second copy is answered as the first."""

    position: int
    first: _Plan
    timeout: float


def _retry_keys(items: Sequence[Inbound]) -> set[RetryKey]:
    return {
        RetryKey(
            item.caller.pk,
            str(item.message.get("messageId")),
            message_digest(item.message, target_pk=item.target.pk),
        )
        for item in items
        if item.message.get("messageId")
    }


def _check_and_place(
    items: Sequence[Inbound],
    now: datetime,
    earlier: dict[RetryKey, EarlierCopy],
    results: list[Accepted | HubError | None],
) -> tuple[list[_Plan], list[_Repeat]]:
    """Check each message and place it in a task, in order. A retry of an earlier message
    and a refused message are answered in `results` at once; a second copy within the batch
    is a `_Repeat` of the first."""
    earlier_tasks = Task.objects.in_bulk([c.task_id for c in earlier.values() if not c.moved_on])
    plans: list[_Plan] = []
    first_in_batch: dict[RetryKey, _Plan] = {}
    repeats: list[_Repeat] = []
    for i, item in enumerate(items):
        try:
            message_parts_check(item.message)
            kind, envelope, summary = classify(item.message, default_kind="request")
            message_sender_check(envelope, item.message, item.caller)
            hub = hub_metadata(item.message.get("metadata"), item.request_metadata)
            timeout = message_timeout(hub)
            digest = message_digest(item.message, target_pk=item.target.pk)
            key = RetryKey(item.caller.pk, str(item.message["messageId"]), digest)
            found = earlier.get(key)
            if found is not None and not found.moved_on:
                results[i] = _accepted(
                    earlier_tasks[found.task_id], found, timeout=timeout, duplicate=True
                )
                continue
            if key in first_in_batch:
                repeats.append(_Repeat(i, first_in_batch[key], timeout))
                continue
            placed = message_place(
                caller=item.caller,
                target=item.target,
                message=item.message,
                hub=hub,
                parent_hint=item.parent_hint,
                traceparent=item.traceparent,
                peer_chain=item.peer_chain,
                now=now,
                timeout=timeout,
            )
        except HubError as exc:
            results[i] = exc
            continue
        plan = _Plan(
            index=i,
            item=item,
            timeout=timeout,
            kind=kind,
            envelope=envelope,
            summary=summary,
            hub=hub,
            task=placed.task,
            created=placed.created,
            remote_context_id=placed.remote_context_id,
            facts=_facts(item, placed.task, placed.created, kind, envelope),
            digest=key.digest,
            repeat=found.repeat + 1 if found is not None else 0,
        )
        plans.append(plan)
        first_in_batch[key] = plan
    return plans, repeats


def _judge(plans: list[_Plan]) -> None:
    """Judge every placed message in one call to the policy, and build its row with the
    decision: a redirected new task goes to the other agent; a refused new task is not
    kept."""
    verdicts = decide_batch([p.facts for p in plans], [p.item.caller.pk for p in plans])
    timeline.mark_batch("decide")
    judged_ns = time.time_ns()
    for plan, judged in zip(plans, verdicts, strict=True):
        plan.judged = judged
        plan.judged_ns = judged_ns
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


def _write(plans: list[_Plan], now: datetime) -> None:
    """Save the tasks (new ones inserted together), the message rows, and the deliveries to
    inbox agents."""
    for p in plans:
        if p.task.target.delivery_mode == DeliveryMode.INBOX:
            p.task.deadline = p.inbox_deadline(now)
    kept = [p for p in plans if p.judged and p.judged.decision.action != "reject"]
    continued = [p.task for p in kept if not p.created]
    for task in continued:
        task.updated_at = now
    with written_together():
        insert_rows([p.task for p in kept if p.created])
        update_rows(continued, ["deadline", "updated_at"])
        insert_returning_pks([p.row for p in plans if p.row is not None])
    ledger_decisions([p.row for p in plans if p.row is not None])
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


def _settle(plans: list[_Plan], results: list[Accepted | HubError | None]) -> None:
    """Answer each judged message in `results`: a refusal, or its Accepted after a hold goes
    to a human or an answer resumes an inbox agent's task; the traffic is published on
    commit."""
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
            replay=p.hub.get("replay"),
            judged_ns=p.judged_ns,
            judge_us=p.judged.latency_us or 0,
            redacted_parts=p.row.parts if decision.content else None,
            decided_by=p.judged.decided_by,
        )
    publish_traffic_on_commit(items_out, tasks_out)


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
        replay=hub_metadata(message.request_metadata).get("replay"),
    )
    wire: dict[str, Any] = {
        "messageId": message.message_id,
        "role": "ROLE_USER",
        "parts": approved_parts(message),
        "contextId": task.context_id,
    }
    if message.metadata:
        wire["metadata"] = message.metadata
    if message.extensions:
        wire["extensions"] = message.extensions
    return accepted, wire
