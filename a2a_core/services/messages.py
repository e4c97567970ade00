"""Accepting a message into the hub: validate it, judge it, place it in a task, record it."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from a2a_core import agent_cache, timeline
from a2a_core.errors import HubError, PolicyRejected
from a2a_core.events import publish_traffic_on_commit
from a2a_core.models import (
    Agent,
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
from a2a_core.services.accepted import Accepted, accepted_of
from a2a_core.services.classify import classify, message_item, message_row
from a2a_core.services.content import masked_summary, request_masked
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
            results[repeat.position] = accepted_of(
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
                results[i] = accepted_of(
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
        results[p.index] = accepted_of(
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
