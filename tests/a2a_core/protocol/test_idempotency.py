"""Retries: the same caller sending the same messageId to the same agent with the same content
gets exactly the first answer back; a reused messageId with anything else, or after the caller
moved the first message's task on, is a new message, never answered with another task."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from a2a.types.a2a_pb2 import CancelTaskRequest, GetTaskRequest, TaskState

from a2a_core.asyncdb import db
from a2a_core.models import Message as MessageRow
from tests.a2a_core.protocol.helpers import eventually, request, send
from tests.a2a_core.protocol.test_metadata import direct_client

pytestmark = pytest.mark.live

V1 = {"A2A-Version": "1.0"}


def message(text: str, message_id: str, **fields: Any) -> dict[str, Any]:
    return {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}], **fields}


@pytest.fixture
async def raw(hub):
    async with httpx.AsyncClient(base_url=hub.url, timeout=30) as client:
        yield client


async def rpc_result(raw: httpx.AsyncClient, token: str, sent: dict[str, Any]) -> dict[str, Any]:
    response = await raw.post(
        "/a2a/echo/",
        json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": sent}},
        headers={"Authorization": f"Bearer {token}", **V1},
    )
    body = response.json()
    assert "result" in body, body
    result: dict[str, Any] = body["result"]
    return result


async def rest_result(raw: httpx.AsyncClient, token: str, sent: dict[str, Any]) -> bytes:
    response = await raw.post(
        "/a2a/echo/rest/message:send",
        json={"message": sent},
        headers={"Authorization": f"Bearer {token}", **V1},
    )
    assert response.status_code == 200, response.text
    return response.content


async def request_rows(message_id: str) -> int:
    return await db(
        lambda: MessageRow.objects.filter(message_id=message_id, direction="request").count()
    )


async def test_an_identical_retry_gets_the_same_task_byte_for_byte(hub, raw):
    scripted, _, _ = await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    sent = message("echo once", "same-1", metadata={"trace": "t-1"})

    first = await rpc_result(raw, token, sent)
    again = await rpc_result(raw, token, sent)

    assert first["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert again == first
    assert len(scripted.state.messages) == 1
    assert await request_rows("same-1") == 1


async def test_an_identical_retry_of_a_direct_message_answer_gets_that_message(hub, raw):
    scripted, _, _ = await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    sent = message("reply hello", "same-2")

    first = await rpc_result(raw, token, sent)
    again = await rpc_result(raw, token, sent)

    assert set(first) == {"message"}
    assert first["message"]["parts"] == [{"text": "reply: hello"}]
    assert again == first
    assert len(scripted.state.messages) == 1


@pytest.mark.parametrize("text", ["echo over rest", "reply over rest"])
async def test_an_identical_retry_over_rest_gets_the_same_body(hub, raw, text):
    scripted, _, _ = await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    sent = message(text, "same-rest")

    first = await rest_result(raw, token, sent)
    again = await rest_result(raw, token, sent)

    assert again == first
    assert len(scripted.state.messages) == 1


async def test_a_reused_message_id_for_another_task_is_that_task_s_message(hub, sdk):
    scripted, _, _ = await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client = await sdk("echo", token)
    done = await send(client, request("echo first", message_id="msg-1"))
    asking = await send(client, request("ask colour?", message_id="msg-2"))
    assert asking.status.state == TaskState.TASK_STATE_INPUT_REQUIRED

    answered = await send(client, request("blue", task_id=asking.id, message_id="msg-1"))

    assert answered.id == asking.id != done.id
    assert answered.status.state == TaskState.TASK_STATE_COMPLETED
    assert [p.text for a in answered.artifacts for p in a.parts] == ["answer: blue"]
    assert len(scripted.state.messages) == 3


async def test_a_reused_message_id_with_other_content_is_a_new_message(hub, sdk):
    scripted, _, _ = await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client = await sdk("echo", token)
    first = await send(client, request("echo one", message_id="msg-1"))

    second = await send(client, request("echo two", message_id="msg-1"))

    assert second.id != first.id
    assert [p.text for a in second.artifacts for p in a.parts] == ["echo: two"]
    assert len(scripted.state.messages) == 2
    assert await request_rows("msg-1") == 2


async def test_a_reused_message_id_to_another_agent_is_a_new_message(hub, sdk):
    echo, _, _ = await hub.endpoint_agent("echo")
    other, _, _ = await hub.endpoint_agent("other")
    _, token = await hub.caller("alpha")
    first = await send(await sdk("echo", token), request("echo hi", message_id="msg-1"))

    second = await send(await sdk("other", token), request("echo hi", message_id="msg-1"))

    assert second.id != first.id
    assert second.status.state == TaskState.TASK_STATE_COMPLETED
    assert (len(echo.state.messages), len(other.state.messages)) == (1, 1)


async def test_a_blocking_retry_of_a_call_in_flight_waits_for_its_answer(hub, sdk):
    scripted, _, _ = await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client = await sdk("echo", token)
    first_call = asyncio.create_task(send(client, request("slow 1", message_id="slow-1")))
    await eventually(lambda: request_rows("slow-1"))

    again = await send(await sdk("echo", token), request("slow 1", message_id="slow-1"))
    first = await first_call

    assert again.id == first.id
    assert again.status.state == TaskState.TASK_STATE_COMPLETED
    assert [p.text for a in again.artifacts for p in a.parts] == ["done slowly"]
    assert len(scripted.state.messages) == 1


async def test_identical_calls_at_once_are_one_message_with_one_answer(hub, raw):
    scripted, _, _ = await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    sent = message("echo at once", "burst-1")

    results = await asyncio.gather(*(rpc_result(raw, token, sent) for _ in range(6)))

    assert results[0]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert all(result == results[0] for result in results)
    assert len(scripted.state.messages) == 1
    assert await request_rows("burst-1") == 1


async def _reuse_after_moving_on(client: Any) -> list[tuple[str, str]]:
    """The conformance suite's use of one messageId per session: a message that leaves its
    task waiting for input, the task moved on (answered, or canceled), then the same message
    again, which must start a task waiting for input again. What each answer was, as
    (which task, its state), tasks named in the order they appeared."""
    names: dict[str, str] = {}
    seen: list[tuple[str, str]] = []

    def note(task: Any) -> None:
        name = names.setdefault(task.id, f"task {len(names) + 1}")
        seen.append((name, TaskState.Name(task.status.state)))

    asking = request("ask which colour?", message_id="tck-input-required")
    first = await send(client, asking)
    note(first)
    note(await send(client, request("blue", task_id=first.id, message_id="tck-complete")))
    second = await send(client, asking)
    note(second)
    note(await client.cancel_task(CancelTaskRequest(id=second.id)))
    note(await send(client, asking))
    return seen


async def test_a_message_id_reused_after_its_task_moved_on_is_new_work_as_it_is_directly(hub, sdk):
    scripted, _, _ = await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")

    direct = await _reuse_after_moving_on(await direct_client(hub, scripted.url))
    through_hub = await _reuse_after_moving_on(await sdk("echo", token))

    assert direct == [
        ("task 1", "TASK_STATE_INPUT_REQUIRED"),
        ("task 1", "TASK_STATE_COMPLETED"),
        ("task 2", "TASK_STATE_INPUT_REQUIRED"),
        ("task 2", "TASK_STATE_CANCELED"),
        ("task 3", "TASK_STATE_INPUT_REQUIRED"),
    ]
    assert through_hub == direct
    # The agent got each of the four sends once: directly, and through the hub.
    assert len(scripted.state.messages) == 8


async def test_a_retry_before_the_task_moved_on_is_still_a_retry(hub, sdk):
    # Reading the task (GetTask) is not moving it on: a caller recovering from a lost answer
    # may read before it sends again.
    scripted, _, _ = await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client = await sdk("echo", token)
    asking = request("ask which colour?", message_id="ask-1")
    first = await send(client, asking)
    await client.get_task(GetTaskRequest(id=first.id))

    again = await send(client, asking)

    assert again.id == first.id
    assert again.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert len(scripted.state.messages) == 1
