"""The outbox: messages queued for delivery outside a caller's request (approved or redirected
by a human), delivered by whichever server process claims them first."""

from __future__ import annotations

from typing import Any

from a2a.types.a2a_pb2 import Message as WireMessage
from django.db import connection, transaction
from google.protobuf.json_format import ParseDict

from a2a_core import tracing
from a2a_core.asyncdb import db
from a2a_core.delivery import dispatch
from a2a_core.logging import get_logger
from a2a_core.models import Agent, Delivery, DeliveryMode, DeliveryState, Direction, Message, Task
from a2a_core.services.inbox import inbox_enqueue
from a2a_core.services.messages import Accepted, queued_delivery

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


def _load(pk: int) -> tuple[Accepted, dict[str, Any], dict[str, Any], Agent, Agent]:
    """The message's Accepted, the message and its request's metadata as the caller sent
    them, its caller and its target."""
    message = Message.objects.select_related("task__caller", "task__target").get(pk=pk)
    task: Task = message.task  # type: ignore[assignment]
    accepted, wire = queued_delivery(message, task)
    caller, target = task.caller, task.target
    assert caller is not None
    return accepted, wire, message.request_metadata, caller, target


@transaction.atomic
def _to_inbox(pk: int, target: Agent) -> None:
    message = Message.objects.get(pk=pk)
    inbox_enqueue([Delivery(message=message, recipient=target, task_id=message.task_id)])


async def deliver_claimed(pks: list[int]) -> None:
    for pk in pks:
        try:
            accepted, wire, request_metadata, caller, target = await db(_load, pk)
            call = dispatch.Call(caller=caller, target=target)
            if target.delivery_mode == DeliveryMode.INBOX:
                await db(_to_inbox, pk, target)
                continue
            with tracing.waited(accepted, since=accepted.message_created_at):
                dispatch.start_pump(
                    call,
                    target,
                    accepted,
                    ParseDict(wire, WireMessage()),
                    accepted_output_modes=[],
                    metadata=dispatch.forwarded_metadata(request_metadata, accepted),
                )
        except Exception:
            log.exception("could not deliver a queued message", extra={"message_pk": pk})


async def outbox_run_once() -> int:
    pks = await db(outbox_claim)
    if pks:
        await deliver_claimed(pks)
    return len(pks)
