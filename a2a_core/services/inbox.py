"""Inbox agents' work: deliveries queued at commit, sent to the agent's connections, acknowledged.

An inbox agent has no server; it holds a websocket to the hub, or long-polls it. Every message
for it is a `Delivery` row committed with the message. A connection claims the deliveries that
are due and sends them; the agent acknowledges each one. Delivery is at-least-once: a delivery
not acknowledged is sent again when the agent reconnects and when its acknowledgement is
overdue; acknowledging twice changes nothing.

The agent is online while it has a live session (a websocket, or a long-poll client that keeps
polling). A server process that dies leaves its sessions behind; the sweeper removes sessions
not seen for a while (`inbox_sessions_expire`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from a2a_core import tracing
from a2a_core.errors import AgentSuspended, HubError, NotFound, Unauthenticated
from a2a_core.events import publish_many_on_commit
from a2a_core.models import (
    ACTIVE_STATE_LIST,
    TERMINAL_STATES,
    Agent,
    AgentStatus,
    Delivery,
    DeliveryMode,
    DeliveryState,
    InboxSession,
    Message,
    Task,
    TaskState,
)
from a2a_core.schemas.a2a import without_hub_metadata
from a2a_core.schemas.events import InboxCanceled, InboxWake
from a2a_core.selectors.task_wire import message_view
from a2a_core.services.agents import agent_set_presence
from a2a_core.services.content import approved_parts
from a2a_core.services.tasks import Failure, tasks_record

# Delivery states that still move forward.
_OPEN = [DeliveryState.PENDING, DeliveryState.QUEUED, DeliveryState.DELIVERED]


def inbox_group(agent_id: int) -> str:
    return f"inbox.{agent_id}"


def inbox_enqueue(deliveries: Sequence[Delivery], *, wake: Iterable[int] | None = None) -> None:
    """Store deliveries (call inside the transaction that records their messages); the
    connections of their recipients (or of the agents in `wake`) are woken once it commits."""
    if not deliveries:
        return
    Delivery.objects.bulk_create(deliveries)
    recipients = sorted(set(wake) if wake is not None else {d.recipient_id for d in deliveries})
    publish_many_on_commit([(inbox_group(pk), InboxWake()) for pk in recipients])


# --- sending ----------------------------------------------------------------------------------


def delivery_frame(delivery: Delivery) -> dict[str, Any]:
    """A delivery as the agent receives it: the A2A message in the hub's ids, who sent it, and
    the task it belongs to (none for a broadcast)."""
    message = delivery.message
    task = delivery.task
    wire = message_view(message, task)
    if message.sealed_parts:
        wire["parts"] = approved_parts(message)
    return {
        "type": "delivery",
        "deliveryId": delivery.pk,
        "attempt": delivery.attempts,
        "from": message.sender.slug if message.sender else "",
        "kind": message.kind,
        "envelope": message.envelope,
        "taskId": task.pk if task else None,
        "contextId": wire.get("contextId", ""),
        "traceId": message.trace_id,
        "deadline": task.deadline.isoformat() if task and task.deadline else None,
        "sentAt": message.created_at.isoformat(),
        "message": wire,
        "requestMetadata": without_hub_metadata(message.request_metadata),
    }


@dataclass(frozen=True)
class Claim:
    """Which of an agent's deliveries to send now (see `inbox_claims`)."""

    agent_id: int
    limit: int
    # queued ones
    pending: bool = True
    # sent ones whose acknowledgement is overdue: sent before this moment
    overdue_before: datetime | None = None
    # every one not acknowledged (a reconnect)
    unacked: bool = False
    # The hash of the token the connection was let in with: when set, nothing is claimed once
    # that token was rotated or the agent suspended or deleted (the claim's answer says why).
    token_hash: str = ""


def inbox_claims(claims: Sequence[Claim]) -> list[list[dict[str, Any]] | Exception]:
    """Claim deliveries for several connections in one transaction; for each claim, the frames
    to send, oldest first, or why that connection may take none any more (`_revoked`: checked
    in the same transaction, so no delivery is claimed for a session after the change that
    ends it has committed). Claimed deliveries are marked sent (attempt + 1); those whose task
    ended meanwhile expire instead."""
    now = timezone.now()
    with transaction.atomic():
        revoked = _revoked(claims)
        found = [[] if i in revoked else _claimed(claim) for i, claim in enumerate(claims)]
        rows = [d for batch in found for d in batch]
        ended = {d.pk for d in rows if d.task is not None and d.task.state in TERMINAL_STATES}
        sending = [d for d in rows if d.pk not in ended]
        if ended:
            Delivery.objects.filter(pk__in=ended).update(state=DeliveryState.EXPIRED)
        if sending:
            Delivery.objects.filter(pk__in=[d.pk for d in sending]).update(
                state=DeliveryState.DELIVERED, attempts=F("attempts") + 1, last_attempt_at=now
            )
            Message.objects.filter(
                pk__in=[d.message_id for d in sending if d.task_id is not None],
                delivery_state__in=[DeliveryState.PENDING, DeliveryState.QUEUED],
            ).update(delivery_state=DeliveryState.DELIVERED)
    for d in sending:
        d.attempts += 1
    frames: list[list[dict[str, Any]] | Exception] = [
        revoked[i] if i in revoked else [delivery_frame(d) for d in batch if d.pk not in ended]
        for i, batch in enumerate(found)
    ]
    return frames


def _revoked(claims: Sequence[Claim]) -> dict[int, HubError]:
    """The claims (by position) whose connection was let in with a token since rotated, or
    whose agent has been suspended or deleted, with the error that ends the connection."""
    agents = {
        pk: (slug, token, status, reason)
        for pk, slug, token, status, reason in Agent.objects.filter(
            pk__in={c.agent_id for c in claims if c.token_hash}
        ).values_list("pk", "slug", "token_hash", "status", "status_reason")
    }
    revoked: dict[int, HubError] = {}
    for i, claim in enumerate(claims):
        if not claim.token_hash:
            continue
        agent = agents.get(claim.agent_id)
        if agent is None:
            revoked[i] = Unauthenticated("the agent was deleted; its token no longer works")
            continue
        slug, token, status, reason = agent
        if token != claim.token_hash:
            revoked[i] = Unauthenticated("the bearer token was rotated; connect with the new one")
        elif status == AgentStatus.SUSPENDED:
            revoked[i] = AgentSuspended(slug, reason)
    return revoked


def _claimed(claim: Claim) -> list[Delivery]:
    if claim.limit <= 0:
        return []
    due = Q(pk__in=[])
    if claim.pending or claim.unacked:
        due |= Q(state=DeliveryState.PENDING)
    if claim.unacked:
        due |= Q(state=DeliveryState.DELIVERED)
    elif claim.overdue_before is not None:
        due |= Q(state=DeliveryState.DELIVERED, last_attempt_at__lt=claim.overdue_before)
    rows = Delivery.objects.filter(due, recipient_id=claim.agent_id).order_by("pk")
    if connection.features.has_select_for_update_skip_locked:
        rows = rows.select_for_update(skip_locked=True, of=("self",))
    return list(rows.select_related("message__sender", "task")[: claim.limit])


def inbox_claim(**claim: Any) -> list[dict[str, Any]]:
    """`inbox_claims` for one connection: `inbox_claim(agent_id=..., limit=..., ...)`."""
    [frames] = inbox_claims([Claim(**claim)])
    if isinstance(frames, Exception):
        raise frames
    return frames


def inbox_acks(acks: Sequence[tuple[int, Sequence[int]]]) -> list[int | Exception]:
    """Apply several ack frames — (agent id, delivery ids) — in one transaction; for each,
    how many deliveries were not acknowledged before, or `NotFound` (that frame changes
    nothing) when any of its deliveries is not that agent's."""
    wanted = {pk for _, ids in acks for pk in ids}
    now = timezone.now()
    with transaction.atomic():
        found = {
            pk: (recipient, state)
            for pk, recipient, state in Delivery.objects.select_for_update()
            .filter(pk__in=wanted)
            .values_list("pk", "recipient_id", "state")
        }
        results: list[int | Exception] = []
        fresh: set[int] = set()
        for agent_id, ids in acks:
            missing = sorted(pk for pk in set(ids) if found.get(pk, (None,))[0] != agent_id)
            if missing:
                results.append(
                    NotFound(
                        f"no delivery {', '.join(map(str, missing))} was sent to you",
                        details={"deliveryIds": missing},
                    )
                )
                continue
            new = {pk for pk in ids if found[pk][1] in _OPEN and pk not in fresh}
            fresh |= new
            results.append(len(new))
        if fresh:
            Delivery.objects.filter(pk__in=fresh).update(state=DeliveryState.ACKED, acked_at=now)
            Message.objects.filter(
                deliveries__pk__in=fresh, task__isnull=False, delivery_state__in=_OPEN
            ).update(delivery_state=DeliveryState.ACKED)
    if fresh and tracing.enabled():
        _trace_fan_out_acks(fresh)
    return results


def _trace_fan_out_acks(delivery_ids: set[int]) -> None:
    """The forward spans of the fan-out copies among `delivery_ids`, just acknowledged: from
    the queued copy to its ack."""
    copies = Delivery.objects.filter(pk__in=delivery_ids, task__isnull=True).select_related(
        "message__sender", "recipient"
    )
    for delivery in copies:
        message = delivery.message
        copy = tracing.Copy(
            trace_id=message.trace_id,
            message_pk=message.pk,
            caller=message.sender.slug if message.sender else "",
            target=delivery.recipient.slug,
            context_id=message.context_id,
            decision=delivery.decision,
            reason=delivery.decision_reason,
        )
        tracing.copy_forwarded(tracing.copy_forward(copy, start=delivery.created_at))


def inbox_ack(*, agent_id: int, delivery_ids: Sequence[int]) -> int:
    """Acknowledge deliveries; returns how many were not acknowledged before. Raises
    `NotFound` (and changes nothing) if any of them is not the agent's."""
    [result] = inbox_acks([(agent_id, delivery_ids)])
    if isinstance(result, Exception):
        raise result
    return result


def inbox_still_unacked(*, agent_id: int, delivery_ids: Sequence[int]) -> set[int]:
    """Which of these deliveries the agent has still not acknowledged."""
    return set(
        Delivery.objects.filter(
            pk__in=delivery_ids, recipient_id=agent_id, state=DeliveryState.DELIVERED
        ).values_list("pk", flat=True)
    )


def inbox_task_canceled(*, agent_id: int, task_id: str) -> None:
    """The caller canceled a task of the agent: its deliveries not sent yet expire, and the
    agent's connections are told."""
    Delivery.objects.filter(
        recipient_id=agent_id, task_id=task_id, state=DeliveryState.PENDING
    ).update(state=DeliveryState.EXPIRED)
    publish_many_on_commit([(inbox_group(agent_id), InboxCanceled(task_id=task_id))])


def inbox_waiting(*, agent_id: int) -> int:
    return Delivery.objects.filter(
        recipient_id=agent_id, state__in=[DeliveryState.PENDING, DeliveryState.DELIVERED]
    ).count()


# --- sessions and presence ----------------------------------------------------------------------


def inbox_connect(*, agent_id: int, channel: str, transport: str) -> bool:
    """Record a live session; the agent is online. True if the session is new (a poll client
    polling again keeps its session)."""
    now = timezone.now()
    _, created = InboxSession.objects.update_or_create(
        channel=channel, defaults={"agent_id": agent_id, "transport": transport, "seen_at": now}
    )
    agent_set_presence(agent_id=agent_id, status=AgentStatus.ONLINE)
    return created


def inbox_seen(*, channels: Sequence[str]) -> None:
    InboxSession.objects.filter(channel__in=channels).update(seen_at=timezone.now())


def inbox_disconnect(*, agent_id: int, channel: str) -> None:
    """Forget a session; the agent is offline when it was the last one."""
    with transaction.atomic():
        InboxSession.objects.filter(channel=channel).delete()
        if not InboxSession.objects.filter(agent_id=agent_id).exists():
            agent_set_presence(agent_id=agent_id, status=AgentStatus.OFFLINE)


def inbox_sessions_expire(*, now: datetime | None = None) -> int:
    """Remove sessions not seen for a while (a dead server process, a poll client that
    stopped polling); their agents go offline when no session is left."""
    now = now or timezone.now()
    stale = Q(
        transport="websocket", seen_at__lt=now - timedelta(seconds=settings.HUB_INBOX_STALE_SECONDS)
    ) | Q(transport="poll", seen_at__lt=now - timedelta(seconds=settings.HUB_INBOX_POLL_GRACE))
    with transaction.atomic():
        gone = list(InboxSession.objects.filter(stale).values_list("pk", "agent_id"))
        if not gone:
            return 0
        InboxSession.objects.filter(pk__in=[pk for pk, _ in gone]).delete()
        left = set(
            InboxSession.objects.filter(agent_id__in={a for _, a in gone}).values_list(
                "agent_id", flat=True
            )
        )
        for agent_id in {a for _, a in gone} - left:
            agent_set_presence(agent_id=agent_id, status=AgentStatus.OFFLINE)
    return len(gone)


# --- deadlines ----------------------------------------------------------------------------------


def _expiry_reason(target: Agent) -> str:
    reason = f"no answer from {target.slug} before the deadline"
    if target.status == AgentStatus.SUSPENDED:
        why = f" ({target.status_reason})" if target.status_reason else ""
        return f"{reason}: {target.slug} is suspended{why}"
    return reason


def inbox_tasks_expire(*, now: datetime | None = None, limit: int = 200) -> int:
    """Fail inbox agents' tasks whose deadline passed without an answer, saying so (and that
    the agent is suspended, when it is); their deliveries not sent yet expire. An answer that
    still comes is recorded as late."""
    now = now or timezone.now()
    due = list(
        Task.objects.filter(
            deadline__lte=now,
            state__in=[*ACTIVE_STATE_LIST, TaskState.INPUT_REQUIRED],
            target__delivery_mode=DeliveryMode.INBOX,
        )
        .select_related("target")
        .order_by("deadline")[:limit]
    )
    if not due:
        return 0
    tasks_record([Failure(task.pk, _expiry_reason(task.target)) for task in due])
    Delivery.objects.filter(task_id__in=[t.pk for t in due], state=DeliveryState.PENDING).update(
        state=DeliveryState.EXPIRED
    )
    return len(due)
