"""The outbox: messages queued for delivery outside a caller's request (approved or redirected
by a human), delivered by whichever server process claims them first."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from a2a.types.a2a_pb2 import Message as WireMessage
from django.db import connection, transaction

from a2a_core import tracing
from a2a_core.asyncdb import db
from a2a_core.call_times import CallTimes
from a2a_core.delivery.call import Call
from a2a_core.delivery.pump import start_pump
from a2a_core.delivery.streams import trace_inbox_forward
from a2a_core.delivery.wire import forwarded_metadata
from a2a_core.logging import get_logger
from a2a_core.models import (
    Agent,
    Delivery,
    DeliveryMode,
    DeliveryState,
    Direction,
    Escalation,
    Message,
    Task,
)
from a2a_core.schemas.protojson import normalized
from a2a_core.services.accepted import Accepted, queued_delivery
from a2a_core.services.inbox import inbox_enqueue

log = get_logger("outbox")


def outbox_claim(limit: int = 20) -> list[int]:
    """Claim queued request messages for delivery by this process (each by one process only)."""
    with transaction.atomic():
        queued = Message.objects.filter(
            delivery_state=DeliveryState.QUEUED, direction=Direction.REQUEST
        ).order_by("pk")
        if connection.features.has_select_for_update_skip_locked:
            queued = queued.select_for_update(skip_locked=True)
        pks = list(queued.values_list("pk", flat=True)[:limit])
        Message.objects.filter(pk__in=pks).update(delivery_state=DeliveryState.PENDING)
    return pks


@dataclass
class _Queued:
    accepted: Accepted
    wire: dict[str, Any]
    request_metadata: dict[str, Any]
    caller: Agent
    target: Agent
    # When the human let it through (None: no human held it), and who.
    decided_at: datetime | None
    decided_by: str = ""


def _load(pk: int) -> _Queued:
    """The message's Accepted, the message and its request's metadata as the caller sent
    them, its caller and its target, and when a human decided on it."""
    message = Message.objects.select_related("task__caller", "task__target").get(pk=pk)
    task: Task = message.task  # type: ignore[assignment]
    accepted, wire = queued_delivery(message, task)
    caller, target = task.caller, task.target
    assert caller is not None
    decided_at, decided_by = (
        Escalation.objects.filter(message=message, decided_at__isnull=False)
        .order_by("-decided_at")
        .values_list("decided_at", "decided_by_name")
        .first()
    ) or (None, "")
    return _Queued(accepted, wire, message.request_metadata, caller, target, decided_at, decided_by)


@transaction.atomic
def _to_inbox(pk: int, target: Agent) -> None:
    message = Message.objects.get(pk=pk)
    inbox_enqueue([Delivery(message=message, recipient=target, task_id=message.task_id)])


async def deliver_claimed(pks: list[int]) -> None:
    for pk in pks:
        try:
            queued = await db(_load, pk)
            accepted, target = queued.accepted, queued.target
            # Received and committed long ago, by the call that was held: this one only
            # delivers (its times start there).
            call = Call(caller=queued.caller, target=target, times=CallTimes(received=0))
            with tracing.waited(
                accepted,
                caller=queued.caller.slug,
                since=accepted.message_created_at,
                until=queued.decided_at,
                approver=queued.decided_by,
            ):
                if target.delivery_mode == DeliveryMode.INBOX:
                    await db(_to_inbox, pk, target)
                    trace_inbox_forward(target, accepted)
                    continue
                start_pump(
                    call,
                    target,
                    accepted,
                    normalized(queued.wire, WireMessage, ignore_unknown_fields=False),
                    accepted_output_modes=[],
                    metadata=forwarded_metadata(queued.request_metadata, accepted),
                )
        except Exception:
            log.exception("could not deliver a queued message", extra={"message_pk": pk})


async def outbox_run_once() -> int:
    pks = await db(outbox_claim)
    if pks:
        await deliver_claimed(pks)
    return len(pks)
