"""Rotating an agent's token, suspending or deleting it ends its open inbox sessions at once,
on every worker; a suspended agent receives, sends and reads nothing until it is resumed."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from a2a.client import A2AClientError
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)

from a2a_core.asyncdb import db
from a2a_core.models import Agent, Delivery
from a2a_core.services.users import user_create
from tests.a2a_core.cli.helpers import a2a, run_cli
from tests.a2a_core.inbox.helpers import Inbox, ended_by_hub, refusal
from tests.a2a_core.inbox.test_inbox_agents import inbox_agent
from tests.a2a_core.protocol.helpers import eventually, request, send
from tests.dashboard.test_live_security import PASSWORD, log_in

pytestmark = pytest.mark.live


async def cli(*args: str) -> str:
    """`manage.py a2a ...` run in the hub's process, as `a2a` commands are run in tests."""
    return await db(a2a, *args)


async def test_rotating_the_token_closes_the_websocket_opened_with_it(hub, sdk):
    _, old = await inbox_agent("duc")
    _, alpha = await hub.caller("alpha")
    inbox = await Inbox.open(hub.url, "duc", old)

    new = (await cli("token", "rotate", "duc")).splitlines()[0].removeprefix("token: ")

    error, code, reason = await ended_by_hub(inbox)
    assert (error["code"], code) == ("unauthenticated", 4401)
    assert "rotated" in error["message"] and "rotated" in reason
    assert (await refusal(hub.url, "duc", old))[1] == 4401
    task = await send(
        await sdk("duc", alpha), request("after the rotation", return_immediately=True)
    )
    fresh = await Inbox.open(hub.url, "duc", new)
    delivery = await fresh.next_of("delivery")
    assert delivery["taskId"] == task.id


async def test_rotating_the_token_closes_a_websocket_held_on_another_worker(hub, second_worker):
    _, token = await inbox_agent("duc")
    inbox = await Inbox.open(second_worker.url, "duc", token)
    assert inbox.hello["agent"] == "duc"

    await cli("token", "rotate", "duc")

    error, code, _ = await ended_by_hub(inbox)
    assert (error["code"], code) == ("unauthenticated", 4401)


async def test_a_waiting_long_poll_ends_when_another_process_suspends_the_agent(hub):
    _, token = await inbox_agent("duc")
    async with httpx.AsyncClient(
        base_url=hub.url, headers={"Authorization": f"Bearer {token}"}, timeout=60
    ) as http:
        await http.get("/inbox/duc/", params={"wait": 0})  # online, its session open
        poll = asyncio.create_task(http.get("/inbox/duc/", params={"wait": 50}))
        done = await asyncio.to_thread(run_cli, "suspend", "duc", "--reason", "audit")
        assert done.stdout == "suspended duc\n", done.stderr
        response = await poll
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "agent_suspended"
    assert "duc is suspended (audit)" in response.json()["error"]["message"]


async def test_a_suspended_agents_work_waits_until_it_is_resumed(hub, sdk):
    _, duc = await inbox_agent("duc")
    _, alpha = await hub.caller("alpha")
    client = await sdk("duc", alpha)
    inbox = await Inbox.open(hub.url, "duc", duc)
    task = await send(client, request("review the release", return_immediately=True))
    first = await inbox.next_of("delivery")

    assert await cli("suspend", "duc", "--reason", "audit") == "suspended duc\n"

    error, code, reason = await ended_by_hub(inbox)
    assert (error["code"], code) == ("agent_suspended", 4403)
    assert "duc is suspended (audit)" in error["message"] and "suspended" in reason
    # Connecting, polling and reporting are refused while it is suspended.
    assert (await refusal(hub.url, "duc", duc))[:2] == (error, 4403)
    async with httpx.AsyncClient(
        base_url=hub.url, headers={"Authorization": f"Bearer {duc}"}, timeout=10
    ) as http:
        polled = await http.get("/inbox/duc/", params={"wait": 0})
        reported = await http.post(
            "/inbox/duc/", json={"type": "status", "taskId": task.id, "state": "completed"}
        )
    assert (polled.status_code, polled.json()["error"]["code"]) == (403, "agent_suspended")
    assert (reported.status_code, reported.json()["error"]["code"]) == (403, "agent_suspended")
    waiting = await client.get_task(GetTaskRequest(id=task.id))
    assert waiting.status.state == TaskState.TASK_STATE_SUBMITTED

    assert await cli("resume", "duc") == "resumed duc\n"

    again = await Inbox.open(hub.url, "duc", duc)
    delivery = await again.next_of("delivery")
    assert (delivery["deliveryId"], delivery["attempt"]) == (first["deliveryId"], 2)
    done = await again.send(
        {"type": "status", "taskId": task.id, "state": "completed", "text": "released"}
    )
    assert done["state"] == "completed"
    finished = await client.get_task(GetTaskRequest(id=task.id))
    assert finished.status.state == TaskState.TASK_STATE_COMPLETED


async def test_work_queued_for_a_suspended_agent_fails_with_the_reason_at_its_deadline(hub, sdk):
    await inbox_agent("duc")
    _, alpha = await hub.caller("alpha")
    client = await sdk("duc", alpha)
    task = await send(
        client,
        request(
            "review the release",
            return_immediately=True,
            metadata={"a2aHub": {"timeoutSeconds": 2}},
        ),
    )
    await cli("suspend", "duc", "--reason", "audit")

    async def failed() -> Any:
        current = await client.get_task(GetTaskRequest(id=task.id))
        return current if current.status.state == TaskState.TASK_STATE_FAILED else None

    current = await eventually(failed)
    assert current.status.message.parts[0].text == (
        "no answer from duc before the deadline: duc is suspended (audit)"
    )
    assert await db(lambda: list(Delivery.objects.values_list("state", flat=True))) == ["expired"]


async def test_a_suspended_agent_can_neither_read_nor_cancel_nor_ask_for_pushes(hub, sdk):
    await inbox_agent("duc")
    _, alpha = await hub.caller("alpha")
    client = await sdk("duc", alpha)
    task = await send(client, request("review the release", return_immediately=True))

    await cli("suspend", "alpha", "--reason", "leaked token")

    refused = [
        client.get_task(GetTaskRequest(id=task.id)),
        client.list_tasks(ListTasksRequest()),
        client.cancel_task(CancelTaskRequest(id=task.id)),
        client.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=task.id, url="https://hooks.example.com/a2a")
        ),
    ]
    streaming = await sdk("duc", alpha, streaming=True)
    refused.append(anext(streaming.subscribe(SubscribeToTaskRequest(id=task.id))))
    for call in refused:
        with pytest.raises(A2AClientError) as error:
            await call
        assert "-32051: alpha is suspended (leaked token)" in str(error.value)
    with pytest.raises(A2AClientError, match="-32053") as error:
        await send(client, request("one more"))
    assert "alpha is suspended" in str(error.value)

    await cli("resume", "alpha")
    assert (await client.get_task(GetTaskRequest(id=task.id))).id == task.id


async def test_deleting_an_agent_in_the_admin_closes_its_websocket(hub):
    agent, token = await inbox_agent("duc")
    inbox = await Inbox.open(hub.url, "duc", token)
    await db(user_create, username="ada", password=PASSWORD, role="admin")
    async with httpx.AsyncClient(base_url=hub.url) as http:
        await log_in(http, "ada")
        page = f"/admin/a2a_core/agent/{agent.pk}/delete/"
        await http.get(page)
        deleted = await http.post(
            page,
            data={"post": "yes", "csrfmiddlewaretoken": http.cookies["csrftoken"]},
            headers={"Referer": f"{hub.url}{page}"},
        )
    assert deleted.status_code == 302, deleted.text
    assert not await db(Agent.objects.filter(slug="duc").exists)

    error, code, _ = await ended_by_hub(inbox)
    assert (error["code"], code) == ("unauthenticated", 4401)
    assert "duc was deleted" in error["message"]
