"""What the hub knows about a message it has committed, and what delivering it needs
(`Accepted`): made by the group commit as it accepts a message (`a2a_core.services.messages`),
and for a queued message (approved or redirected) when the outbox delivers it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings

from a2a_core.models import Agent, Decision, Message, Task
from a2a_core.schemas.a2a import hub_metadata
from a2a_core.selectors.message_retries import EarlierCopy
from a2a_core.services.content import approved_parts


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


def hub_fields(task: Task, caller: Agent, replay: Any = None) -> dict[str, Any]:
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


def accepted_of(
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
        hub_fields=hub_fields(task, caller, replay) if caller is not None else {},
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


def queued_delivery(message: Message, task: Task) -> tuple[Accepted, dict[str, Any]]:
    """What delivering a queued (approved or redirected) message needs: its Accepted (with
    the human's decision and its reason), and the message as the caller sent it (A2A
    ProtoJSON, the hub's ids)."""
    caller = task.caller
    accepted = accepted_of(
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
