"""Every event the hub publishes is one of the typed events, and nothing else reads as one."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from a2a.types.a2a_pb2 import GetTaskRequest, TaskState
from pydantic import ValidationError

from a2a_core import events
from a2a_core.asyncdb import db
from a2a_core.models import Escalation
from a2a_core.schemas.events import (
    EVENT_ADAPTER,
    MessageItem,
    PolicyActivated,
    Traffic,
    parse_event,
    wire,
)
from a2a_core.services.escalations import escalation_approve
from a2a_core.services.policy import policy_publish
from tests.a2a_core.inbox.helpers import Inbox
from tests.a2a_core.inbox.test_inbox_agents import inbox_agent
from tests.a2a_core.inbox.test_request_response import REQUEST, envelope_request, response_parts
from tests.a2a_core.protocol.helpers import eventually, request, send


@pytest.fixture
def heard() -> Iterator[list[tuple[str, dict[str, Any]]]]:
    """Every event this process publishes, as the channel layer carries it."""
    seen: list[tuple[str, dict[str, Any]]] = []
    listener = lambda group, payload: seen.append((group, payload))  # noqa: E731
    events.add_local_listener(listener)
    yield seen
    events.remove_local_listener(listener)


@pytest.mark.live
async def test_every_event_of_calls_a_held_message_an_approval_and_an_inbox_is_typed(
    hub, sdk, heard
):
    await db(
        policy_publish,
        document={"matrix": [{"caller": "alpha", "target": "echo", "action": "approve"}]},
        reason="hold alpha's calls",
        actor_label="test",
    )
    await hub.endpoint_agent("echo")
    _, alpha = await hub.caller("alpha")
    client = await sdk("echo", alpha)
    held = await send(client, request("echo please"))
    escalation = await db(lambda: Escalation.objects.get(task_id=held.id))
    await db(escalation_approve, escalation_id=escalation.pk, actor_label="operator")

    async def completed() -> bool:
        task = await client.get_task(GetTaskRequest(id=held.id))
        return task.status.state == TaskState.TASK_STATE_COMPLETED

    await eventually(completed)
    _, duc = await inbox_agent("duc")
    inbox = await Inbox.open(hub.url, "duc", duc)
    call = asyncio.create_task(
        send(await sdk("duc", alpha), envelope_request(REQUEST, timeout=10, message_id="typed"))
    )
    delivery = await inbox.next_of("delivery")
    await inbox.send(
        {
            "type": "status",
            "taskId": delivery["taskId"],
            "state": "completed",
            "parts": response_parts(),
        }
    )
    assert (await call).status.state == TaskState.TASK_STATE_COMPLETED
    await inbox.close()

    async def answered_heard() -> bool:
        return any(
            item["type"] == "answered" for _, p in list(heard) for item in p.get("items", ())
        )

    await eventually(answered_heard)
    sent = list(heard)
    parsed = [(group, EVENT_ADAPTER.validate_python(payload)) for group, payload in sent]
    names = {event.event for _, event in parsed}
    assert {
        "policy.activated",
        "agent.registered",
        "traffic",
        "task.changed",
        "escalation.opened",
        "escalation.decided",
        "outbox.queued",
        "inbox.wake",
    } <= names
    items = {item.type for _, e in parsed if isinstance(e, Traffic) for item in e.items}
    assert items == {"message", "task", "answered"}
    # Once approved, the held message's item comes again, marked decided, with the decision.
    decided = [
        (item.message_pk, item.decision, item.reason)
        for _, e in parsed
        if isinstance(e, Traffic)
        for item in e.items
        if isinstance(item, MessageItem) and item.decided
    ]
    assert (escalation.message_id, "deliver", "approved_by_human") in decided
    # Read back, each is the very event that was sent.
    assert [wire(event) for _, event in parsed] == [payload for _, payload in sent]


def test_an_event_with_a_field_it_does_not_have_is_refused():
    activated = wire(PolicyActivated(number=3))
    with pytest.raises(ValidationError, match="extra_forbidden"):
        EVENT_ADAPTER.validate_python({**activated, "actor": "ana"})
    assert parse_event({**activated, "actor": "ana"}) is None
    assert parse_event({"type": "hub.event", "event": "policy.renamed", "number": 3}) is None

    item = MessageItem(
        message_pk=1,
        kind="request",
        direction="request",
        sender_id=1,
        target_id=2,
        decision="deliver",
        reason="ok",
        task_id=None,
        state="",
    )
    traffic = wire(Traffic(items=[item]))
    traffic["items"][0]["parts"] = [{"text": "not carried"}]
    with pytest.raises(ValidationError, match="extra_forbidden"):
        EVENT_ADAPTER.validate_python(traffic)
