"""Request/response with a deadline (seed 004 `sendA2ARequest`): answered in time, or late."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from a2a.types.a2a_pb2 import GetTaskRequest, Message, Part, Role, SendMessageRequest, TaskState
from google.protobuf.json_format import ParseDict

from a2a_core.asyncdb import db
from a2a_core.models import Message as MessageRow
from a2a_core.schemas.envelopes import ENVELOPE_EXTENSION, ENVELOPE_MEDIA_TYPE
from tests.a2a_core.inbox.helpers import Inbox
from tests.a2a_core.inbox.test_inbox_agents import inbox_agent
from tests.a2a_core.protocol.helpers import eventually, send

pytestmark = pytest.mark.live


def envelope_request(
    envelope: dict[str, Any], *, timeout: float | None = None, message_id: str
) -> SendMessageRequest:
    message = Message(message_id=message_id, role=Role.ROLE_USER, extensions=[ENVELOPE_EXTENSION])
    message.parts.append(ParseDict({"data": envelope, "mediaType": ENVELOPE_MEDIA_TYPE}, Part()))
    if timeout is not None:
        message.metadata.update({"a2aHub": {"timeoutSeconds": timeout}})
    return SendMessageRequest(message=message)


REQUEST = {
    "kind": "request",
    "correlationId": "c-42",
    "expectsResponse": True,
    "payload": {"action": "lookup", "text": "the customer's plan"},
}


def response(correlation_id: str = "c-42") -> dict[str, Any]:
    return {"kind": "response", "correlationId": correlation_id, "payload": {"text": "enterprise"}}


def response_parts(correlation_id: str = "c-42") -> list[dict[str, Any]]:
    return [{"data": response(correlation_id), "mediaType": ENVELOPE_MEDIA_TYPE}]


async def test_a_response_within_the_deadline_answers_the_request(hub, sdk):
    _, duc = await inbox_agent("duc")
    _, alpha = await hub.caller("alpha")
    inbox = await Inbox.open(hub.url, "duc", duc)
    client = await sdk("duc", alpha)

    call = asyncio.create_task(send(client, envelope_request(REQUEST, timeout=10, message_id="r1")))
    delivery = await inbox.next_of("delivery")
    assert delivery["kind"] == "request" and delivery["envelope"]["correlationId"] == "c-42"
    assert delivery["deadline"] is not None
    wrong = await inbox.send(
        {
            "type": "status",
            "taskId": delivery["taskId"],
            "state": "completed",
            "parts": response_parts("c-7"),
        }
    )
    assert wrong["code"] == "invalid" and "c-42" in wrong["errors"][0]["message"]
    await inbox.send(
        {
            "type": "status",
            "taskId": delivery["taskId"],
            "state": "completed",
            "parts": response_parts(),
        }
    )
    task = await call
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    [reply] = await db(lambda: list(MessageRow.objects.filter(direction="reply")))
    assert (reply.kind, reply.correlation_id, reply.late) == ("response", "c-42", False)
    await inbox.close()


async def test_no_response_by_the_deadline_fails_the_request_and_a_late_one_is_kept(hub, sdk):
    _, duc = await inbox_agent("duc")
    _, alpha = await hub.caller("alpha")
    inbox = await Inbox.open(hub.url, "duc", duc)
    client = await sdk("duc", alpha)

    task = await send(client, envelope_request(REQUEST, timeout=1, message_id="r2"))
    delivery = await inbox.next_of("delivery")

    async def failed() -> Any:
        current = await client.get_task(GetTaskRequest(id=task.id))
        return current if current.status.state == TaskState.TASK_STATE_FAILED else None

    current = await eventually(failed)
    assert current.status.message.parts[0].text == "no answer from duc before the deadline"

    late = await inbox.send(
        {
            "type": "status",
            "taskId": delivery["taskId"],
            "state": "completed",
            "parts": response_parts(),
        }
    )
    assert (late["type"], late["late"], late["state"]) == ("ok", True, "failed")
    [reply] = await db(lambda: list(MessageRow.objects.filter(direction="reply", task_id=task.id)))
    assert (reply.kind, reply.late) == ("response", True)
    assert (
        await client.get_task(GetTaskRequest(id=task.id))
    ).status.state == TaskState.TASK_STATE_FAILED
    await inbox.close()


async def test_a_response_sent_as_its_own_message_answers_the_open_request(hub, sdk):
    """Seed 004's `sendA2AResponse`: the answering agent sends a `response` back to the
    requester; the hub matches it to the request by correlationId."""
    _, duc = await inbox_agent("duc")
    _, alpha = await hub.caller("alpha")
    ask = envelope_request(REQUEST, timeout=10, message_id="r3")
    ask.configuration.return_immediately = True
    asked = await send(await sdk("duc", alpha), ask)
    assert asked.status.state == TaskState.TASK_STATE_SUBMITTED
    # duc answers with its own SendMessage to the requester, through the hub.
    answered = await send(
        await sdk("alpha", duc), envelope_request(response(), message_id="resp-1")
    )
    assert answered.id == asked.id
    assert answered.status.state == TaskState.TASK_STATE_COMPLETED
    stored = await db(
        lambda: list(
            MessageRow.objects.filter(message_id="resp-1").values_list("direction", "task_id")
        )
    )
    assert stored == [("reply", asked.id)]
