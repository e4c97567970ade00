"""Sending fan-out copies to endpoint agents: each on its own, retried with backoff.

A claimed delivery is leased (its next attempt pushed into the future) so that no other
server process sends it meanwhile; a process that dies mid-send leaves the lease to expire and
the delivery is tried again. Each copy is a SendMessage with `returnImmediately` and the
original messageId (an agent that saw it before can tell). An agent that answers — with a
task or a message — has it; one that refuses it (an A2A error) will not take it on a retry
either; one that is down or slow is tried again after 1, 2, 4, 8 s... up to
HUB_FANOUT_MAX_ATTEMPTS, then the delivery fails with the last error.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from a2a.types.a2a_pb2 import Message as WireMessage
from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from a2a_core import tracing
from a2a_core.asyncdb import db
from a2a_core.backoff import backoff
from a2a_core.delivery.agent_errors import AgentRefused
from a2a_core.delivery.endpoint import forwarder
from a2a_core.errors import HubError
from a2a_core.logging import get_logger
from a2a_core.models import Agent, Delivery, DeliveryMode, DeliveryState
from a2a_core.schemas.a2a import HUB_METADATA
from a2a_core.schemas.protojson import normalized
from a2a_core.traceparent import header as traceparent

log = get_logger("fanout")

# How long a claimed delivery is left to the process sending it.
LEASE_SECONDS = 120
MAX_PARALLEL = 32


@dataclass(frozen=True)
class Copy:
    delivery_id: int
    attempt: int
    recipient: Agent
    message: dict[str, Any]
    trace_id: str
    # The request's metadata as the caller sent it, the hub's key holding the copy's fields.
    request_metadata: dict[str, Any]
    traced: tracing.Copy


def fanout_claim(limit: int = MAX_PARALLEL) -> list[Copy]:
    """Lease the endpoint deliveries that are due."""
    now = timezone.now()
    with transaction.atomic():
        due = Delivery.objects.filter(
            state=DeliveryState.PENDING,
            next_attempt_at__lte=now,
            recipient__delivery_mode=DeliveryMode.ENDPOINT,
        ).order_by("next_attempt_at", "pk")
        if connection.features.has_select_for_update_skip_locked:
            due = due.select_for_update(skip_locked=True, of=("self",))
        rows = list(due.select_related("message__sender", "recipient")[:limit])
        Delivery.objects.filter(pk__in=[d.pk for d in rows]).update(
            attempts=F("attempts") + 1,
            last_attempt_at=now,
            next_attempt_at=now + timedelta(seconds=LEASE_SECONDS),
        )
    copies = []
    for d in rows:
        message = d.message
        hub = {
            "caller": message.sender.slug if message.sender else "",
            "fanOut": True,
            "deliveryId": d.pk,
            "traceId": message.trace_id,
        }
        wire: dict[str, Any] = {
            "messageId": message.message_id,
            "role": "ROLE_USER",
            "parts": message.parts,
            "contextId": message.context_id,
            "metadata": {**message.metadata, HUB_METADATA: hub},
        }
        if message.extensions:
            wire["extensions"] = message.extensions
        request_metadata = message.request_metadata
        if HUB_METADATA in request_metadata:
            request_metadata = {**request_metadata, HUB_METADATA: hub}
        traced = tracing.Copy(
            trace_id=message.trace_id,
            message_pk=message.pk,
            caller=message.sender.slug if message.sender else "",
            target=d.recipient.slug,
            context_id=message.context_id,
            decision=d.decision,
            reason=d.decision_reason,
        )
        copies.append(
            Copy(
                d.pk, d.attempts + 1, d.recipient, wire, message.trace_id, request_metadata, traced
            )
        )
    return copies


def fanout_outcome(*, delivery_id: int, attempt: int, error: str = "", final: bool = False) -> None:
    """Record how sending a copy went: no error, delivered; otherwise retried later, or failed
    when `final` or out of attempts."""
    now = timezone.now()
    rows = Delivery.objects.filter(pk=delivery_id, state=DeliveryState.PENDING)
    if not error:
        rows.update(state=DeliveryState.ACKED, acked_at=now, next_attempt_at=None, last_error="")
    elif final or attempt >= settings.HUB_FANOUT_MAX_ATTEMPTS:
        rows.update(state=DeliveryState.FAILED, next_attempt_at=None, last_error=error[:2000])
    else:
        wait = timedelta(seconds=backoff(attempt, 1.0))
        rows.update(next_attempt_at=now + wait, last_error=error[:2000])


async def _send(copy: Copy) -> None:
    error, final = "", False
    span = tracing.copy_forward(copy.traced)
    try:
        async for _ in forwarder().send(
            copy.recipient,
            normalized(copy.message, WireMessage, ignore_unknown_fields=False),
            streaming=False,
            headers={"traceparent": tracing.traceparent_of(span) or traceparent(copy.trace_id)},
            wait_seconds=settings.HUB_FORWARD_TIMEOUT,
            return_immediately=True,
            metadata=copy.request_metadata,
        ):
            break
    except AgentRefused as exc:
        error, final = f"{copy.recipient.slug} refused it: {exc.error.message}", True
    except HubError as exc:
        error = f"{copy.recipient.slug} {exc.message}"
    except Exception as exc:
        log.exception("fan-out copy failed", extra={"delivery_id": copy.delivery_id})
        error = f"the hub could not send it: {exc}"
    tracing.copy_forwarded(span, why=error)
    await db(
        fanout_outcome, delivery_id=copy.delivery_id, attempt=copy.attempt, error=error, final=final
    )


async def fanout_run_once() -> int:
    """Send every endpoint copy that is due, in parallel; return how many were tried."""
    copies = await db(fanout_claim)
    if copies:
        await asyncio.gather(*(_send(copy) for copy in copies))
    return len(copies)
