"""Streams — to the caller of SendStreamingMessage and to every SubscribeToTask subscriber
alike — are read from the task's recorded event log, woken by the channel layer, so all of
them see the same events in the same order.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from a2a.types.a2a_pb2 import SendMessageRequest, SubscribeToTaskRequest
from a2a.utils.errors import UnsupportedOperationError
from channels.layers import get_channel_layer

from a2a_core import selectors, tracing
from a2a_core.asyncdb import db
from a2a_core.delivery.accept import accept, deliver_to, inline_push, save_inline_push
from a2a_core.delivery.call import Call, MessageSend
from a2a_core.delivery.pump import deliver_request, in_background
from a2a_core.delivery.wire import stream_item, wire_task
from a2a_core.models import (
    INTERRUPTED_STATES,
    TERMINAL_STATES,
    Agent,
    DeliveryMode,
    TaskEventKind,
)
from a2a_core.selectors.task_events import task_events_after, task_snapshot
from a2a_core.services.accepted import Accepted

# How often a stream re-reads the event log when no event arrives (the bus is best effort).
POLL_SECONDS = 2.0


async def watch_task_events(
    task_id: str, *, after: int, stop_on_interrupt: bool
) -> AsyncIterator[dict[str, Any]]:
    """Yield the task's status and artifact events after `after`, in order, until it ends
    (or, with `stop_on_interrupt`, until it needs input or auth after `after`: a message that
    answers the task's question finds it still waiting until the agent takes the answer)."""
    layer = get_channel_layer()
    channel = await layer.new_channel() if layer else ""
    if layer:
        await layer.group_add(f"task.{task_id}", channel)
    try:
        last = after
        while True:
            rows, state, state_seq = await db(task_events_after, task_id=task_id, after=last)
            for seq, kind, payload in rows:
                last = seq
                if kind in (TaskEventKind.STATUS, TaskEventKind.ARTIFACT):
                    yield payload
            interrupted = stop_on_interrupt and state in INTERRUPTED_STATES and state_seq > after
            if state in TERMINAL_STATES or interrupted:
                return
            try:
                async with asyncio.timeout(POLL_SECONDS):
                    if layer:
                        await layer.receive(channel)
                    else:
                        await asyncio.sleep(POLL_SECONDS)
            except TimeoutError:
                pass
    finally:
        if layer:
            await layer.group_discard(f"task.{task_id}", channel)


def trace_inbox_forward(target: Agent, accepted: Accepted) -> None:
    """When tracing: the forward to inbox agent `target` is a span from its queued delivery
    until the agent's report ends the task or asks for input (the agent's own calls meanwhile
    hang under it, as they do under an endpoint agent's forward), wherever the report lands."""
    if not tracing.forward(target, accepted):
        return
    in_background(_inbox_forward_ends(accepted.task_id), name=f"trace-{accepted.task_id}")


async def _inbox_forward_ends(task_id: str) -> None:
    try:
        async for _ in watch_task_events(task_id, after=0, stop_on_interrupt=True):
            pass
    finally:
        tracing.forwarded(task_id)


async def stream_message(call: Call, request: SendMessageRequest) -> AsyncIterator[Any]:
    """SendStreamingMessage: the task first (unless the message answers the task's question),
    then its events until it ends or needs input."""
    send = MessageSend.of(request)
    push_config = await inline_push(send)
    accepted = await accept(call, send)
    call.times.now("committed")
    await save_inline_push(call, send, accepted, push_config)
    view, seq, state = await db(task_snapshot, task_id=accepted.task_id, history_length=None)
    settled = accepted.duplicate or accepted.decision == "hold"
    # A message answering the agent's question: as the agent's own stream does, this one
    # starts with the task moving on, not with the task as it was, still asking.
    if settled or state not in INTERRUPTED_STATES:
        yield wire_task(view)
    if settled:
        if state in TERMINAL_STATES or state in INTERRUPTED_STATES:
            return
    else:
        target = await deliver_to(call, accepted)
        if target.delivery_mode == DeliveryMode.ENDPOINT:
            deliver_request(call, target, accepted, send)
        else:
            trace_inbox_forward(target, accepted)
    async for payload in watch_task_events(accepted.task_id, after=seq, stop_on_interrupt=True):
        yield stream_item(payload)


async def subscribe(call: Call, request: SubscribeToTaskRequest) -> AsyncIterator[Any]:
    """SubscribeToTask: the task as it is now, then its events until it reaches a terminal state."""
    task = await db(
        selectors.task_visible, task_id=request.id, agent=call.caller, target=call.target
    )
    if task.state in TERMINAL_STATES:
        raise UnsupportedOperationError(
            f"task {task.pk} is {task.state}; there is nothing to follow"
        )
    view, seq, _ = await db(task_snapshot, task_id=task.pk, history_length=None)
    yield wire_task(view)
    async for payload in watch_task_events(task.pk, after=seq, stop_on_interrupt=False):
        yield stream_item(payload)
