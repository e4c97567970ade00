"""The hub's task follows the endpoint agent's: an agent that answers with a task still
working and finishes it on its own is followed to its end."""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from datetime import timedelta

import httpx
import pytest
from a2a.types.a2a_pb2 import (
    GetTaskRequest,
    ListTasksRequest,
    SubscribeToTaskRequest,
    TaskState,
)
from django.utils import timezone
from google.protobuf.json_format import MessageToDict

from a2a_core.asyncdb import db
from a2a_core.models import Task
from tests.a2a_core.protocol.helpers import eventually, request, send
from tests.conftest import Worker
from tests.factories import make_task

pytestmark = pytest.mark.live


def texts(task) -> list[str]:
    return [p.text for a in task.artifacts for p in a.parts if p.text]


async def completed(client, task_id: str):
    async def check():
        task = await client.get_task(GetTaskRequest(id=task_id))
        return task if task.status.state == TaskState.TASK_STATE_COMPLETED else None

    return await eventually(check, within=20)


@pytest.mark.parametrize("streaming", [True, False], ids=["subscribes", "polls"])
async def test_a_working_answer_is_followed_until_the_agent_completes_it(hub, sdk, streaming):
    await hub.endpoint_agent("lazy", streaming=streaming, ignores_blocking=True)
    _, token = await hub.caller("alpha")
    client = await sdk("lazy", token)

    answer = await send(client, request("later 1"))
    assert answer.status.state == TaskState.TASK_STATE_WORKING

    done = await completed(client, answer.id)
    assert texts(done) == ["done later"]
    listed = await client.list_tasks(ListTasksRequest())
    assert [t.status.state for t in listed.tasks] == [TaskState.TASK_STATE_COMPLETED]


async def test_following_ends_at_the_tasks_deadline(hub, sdk):
    await hub.endpoint_agent("lazy", streaming=False, ignores_blocking=True)
    _, token = await hub.caller("alpha")
    client = await sdk("lazy", token)
    answer = await send(client, request("later 30", metadata={"a2aHub": {"timeoutSeconds": 1}}))
    assert answer.status.state == TaskState.TASK_STATE_WORKING

    async def failed():
        task = await client.get_task(GetTaskRequest(id=answer.id))
        return task if task.status.state == TaskState.TASK_STATE_FAILED else None

    task = await eventually(failed, within=20)
    assert task.status.message.parts[0].text == "lazy had not finished it by its deadline"


async def test_a_task_delivered_in_the_background_is_followed_after_the_agents_answer(hub, sdk):
    # returnImmediately: the hub delivers in the background; this agent does not stream, so
    # its one answer (working) ends the exchange, and the hub follows the task from there.
    await hub.endpoint_agent("lazy", streaming=False, ignores_blocking=True)
    _, token = await hub.caller("alpha")
    client = await sdk("lazy", token)

    answer = await send(client, request("later 1", return_immediately=True))
    assert answer.status.state == TaskState.TASK_STATE_SUBMITTED

    done = await completed(client, answer.id)
    assert texts(done) == ["done later"]


async def test_a_subscriber_at_the_hub_gets_the_agents_later_events(hub, sdk):
    await hub.endpoint_agent("lazy", ignores_blocking=True)
    _, token = await hub.caller("alpha")
    client = await sdk("lazy", token)
    answer = await send(client, request("later 1"))
    assert answer.status.state == TaskState.TASK_STATE_WORKING

    streaming = await sdk("lazy", token, streaming=True)
    events = [
        MessageToDict(e) async for e in streaming.subscribe(SubscribeToTaskRequest(id=answer.id))
    ]
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    artifacts = [e["artifactUpdate"]["artifact"] for e in events if "artifactUpdate" in e]
    assert [a["parts"][0]["text"] for a in artifacts] == ["done later"]


# --- across a restart and a crash -----------------------------------------------------------


def rpc(text: str, message_id: str, **metadata: object) -> dict:
    message = {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}
    if metadata:
        message["metadata"] = {"a2aHub": metadata}
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}


async def task_at(http: httpx.AsyncClient, worker: Worker, agent: str, task_id: str) -> dict:
    body = {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task_id}}
    response = await http.post(f"{worker.url}/a2a/{agent}/", json=body)
    return response.json()["result"]


async def ended_at(http: httpx.AsyncClient, worker: Worker, agent: str, task_id: str) -> dict:
    async def check():
        task = await task_at(http, worker, agent, task_id)
        return task if task["status"]["state"] in ENDED else None

    return await eventually(check, within=60)


ENDED = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED"}
# Leases and hand-overs short enough for a test to see them.
FAST = {"HUB_FOLLOW_LEASE_SECONDS": "2", "HUB_ABANDONED_GRACE_SECONDS": "1"}


def kill(worker: Worker) -> None:
    os.kill(worker.process.pid, signal.SIGKILL)
    worker.process.wait(10)


async def test_a_followed_task_is_resumed_after_the_hub_is_killed(hub):
    scripted, _, _ = await hub.endpoint_agent("lazy", ignores_blocking=True)
    _, token = await hub.caller("alpha")
    doomed = Worker(**FAST).wait()
    try:
        async with httpx.AsyncClient(
            headers={"Authorization": f"Bearer {token}", "A2A-Version": "1.0"}, timeout=30
        ) as http:
            response = await http.post(f"{doomed.url}/a2a/lazy/", json=rpc("later 3", "m-1"))
            answer = response.json()["result"]["task"]
            assert answer["status"]["state"] == "TASK_STATE_WORKING"
            kill(doomed)
            restarted = Worker(**FAST).wait()
            try:
                task = await ended_at(http, restarted, "lazy", answer["id"])
            finally:
                restarted.stop()
    finally:
        doomed.stop()
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task["status"]["message"]["parts"]
    assert [a["parts"] for a in task["artifacts"]] == [[{"text": "done later"}]]
    assert len(scripted.state.messages) == 1


async def test_work_the_agent_finished_while_the_hub_was_down_is_recorded_as_it_ended(hub):
    scripted, _, _ = await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    doomed = Worker(**FAST).wait()
    try:
        async with httpx.AsyncClient(
            headers={"Authorization": f"Bearer {token}", "A2A-Version": "1.0"}, timeout=30
        ) as http:
            call = asyncio.ensure_future(
                http.post(f"{doomed.url}/a2a/echo/", json=rpc("slow 2", "m-1", timeoutSeconds=3))
            )
            await eventually(lambda: _received(scripted))
            kill(doomed)
            with pytest.raises(httpx.TransportError):
                await call
            [task_id] = await db(lambda: list(Task.objects.values_list("pk", flat=True)))
            restarted = Worker(**FAST).wait()
            try:
                task = await ended_at(http, restarted, "echo", task_id)
                # A retry of the same message gets the task as the agent ended it.
                retry = await http.post(
                    f"{restarted.url}/a2a/echo/", json=rpc("slow 2", "m-1", timeoutSeconds=3)
                )
            finally:
                restarted.stop()
    finally:
        doomed.stop()
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task["status"]["message"]["parts"]
    assert task["artifacts"][0]["parts"] == [{"text": "done slowly"}]
    assert retry.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert len(scripted.state.messages) == 1


async def _received(scripted) -> bool:
    return bool(scripted.state.messages)


async def _lost_delivery(hub, sdk, settings, first: str) -> Task:
    """A task the hub lost with its server process before it learned the answer, to an
    agent that answered `first` before: failed once the hub has asked the agent."""
    settings.HUB_ABANDONED_GRACE_SECONDS = 0
    _, agent, _ = await hub.endpoint_agent("echo")
    caller, token = await hub.caller("alpha")
    await send(await sdk("echo", token), request(first))
    past = timezone.now() - timedelta(seconds=5)
    task = await db(make_task, target=agent, caller=caller, context_id=str(uuid.uuid4()))
    await db(lambda: Task.objects.filter(pk=task.pk).update(deadline=past))

    async def ended():
        row = await db(lambda: Task.objects.get(pk=task.pk))
        return row if row.state == "failed" else None

    return await eventually(ended, within=20)


async def test_a_lost_delivery_the_agent_never_received_fails_saying_to_send_it_again(
    hub, sdk, settings
):
    # The agent keeps a task for what it receives (it answered with one before): not having
    # one for this delivery, it never received it.
    failed = await _lost_delivery(hub, sdk, settings, first="echo hello")
    assert failed.reason == (
        "the hub lost this delivery before echo received it (its server process stopped); "
        "send it again with a new messageId (this one is answered with this failed task)"
    )
    assert failed.status_message["metadata"] == {"a2aHub": {"delivery": "notReceived"}}


async def test_a_lost_delivery_to_an_agent_that_keeps_no_task_is_of_unknown_outcome(
    hub, sdk, settings
):
    # The agent answers with a Message and keeps no task: that it has none for this delivery
    # says nothing about whether it received it.
    failed = await _lost_delivery(hub, sdk, settings, first="reply hello")
    assert failed.reason == (
        "the hub lost this delivery (its server process stopped); echo keeps no task (it "
        "answers with a Message), so whether it received this is unknown"
    )
    assert "send it again" not in failed.reason
    assert failed.status_message["metadata"] == {"a2aHub": {"delivery": "unknown"}}
