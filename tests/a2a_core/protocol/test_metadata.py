"""Metadata crosses the hub untouched: what an agent puts on its tasks, messages and events
reaches the caller as it would calling the agent directly, on every path; what a caller puts
on its message and request reaches the agent, with the hub's own fields under `a2aHub`."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import (
    GetTaskRequest,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from google.protobuf.json_format import MessageToDict

from a2a_core.asyncdb import db
from a2a_core.models import Escalation, Task
from a2a_core.services.escalations import escalation_approve
from a2a_core.services.policy import policy_publish
from tests.a2a_core.inbox.helpers import Inbox, close_opened_inboxes
from tests.a2a_core.inbox.test_fan_out import broadcast, fan_out
from tests.a2a_core.protocol.helpers import (
    BINDINGS,
    collect,
    eventually,
    request,
    send,
    stored_task,
)
from tests.a2a_core.push.conftest import Webhook
from tests.agents import META
from tests.factories import register

pytestmark = pytest.mark.live

CALLER_MESSAGE = {"caller.note": {"lang": "en", "tags": ["x", 1]}}
CALLER_REQUEST = {"caller.request": {"budget": 3}}
# The task's metadata as the agent's own task store keeps it: the task's, with every status
# update's merged in.
TASK_METADATA = {**META["task"], **META["working"], **META["said"], **META["done"]}


@pytest.fixture(autouse=True)
async def _close_inboxes(hub):
    yield
    await close_opened_inboxes()


def metadata_request(text: str, **kwargs: Any) -> SendMessageRequest:
    built = request(text, metadata=CALLER_MESSAGE, **kwargs)
    built.metadata.update(CALLER_REQUEST)
    return built


async def direct_client(hub: Any, url: str, *, streaming: bool = False) -> Any:
    """The official SDK client calling the agent itself, not through the hub."""
    http = httpx.AsyncClient(timeout=30)
    hub.http_clients.append(http)
    factory = ClientFactory(ClientConfig(streaming=streaming, httpx_client=http))
    return await factory.create_from_url(url)


def _message(message: dict[str, Any] | None) -> tuple[str, Any] | None:
    if message is None:
        return None
    return message["role"], message.get("metadata")


def shape(item: dict[str, Any]) -> tuple[Any, ...]:
    """What a task, message or event carries as metadata (and where), ids and times left out."""
    if "task" in item or "status" in item:
        task = item.get("task", item)
        return (
            "task",
            task["status"]["state"],
            task.get("metadata"),
            _message(task["status"].get("message")),
            [(a["artifactId"], a.get("metadata")) for a in task.get("artifacts", [])],
            [_message(m) for m in task.get("history", [])],
        )
    if "statusUpdate" in item:
        update = item["statusUpdate"]
        return (
            "status",
            update["status"]["state"],
            update.get("metadata"),
            _message(update["status"].get("message")),
        )
    if "artifactUpdate" in item:
        update = item["artifactUpdate"]
        artifact = update["artifact"]
        return (
            "artifact",
            update.get("metadata"),
            artifact["artifactId"],
            artifact.get("metadata"),
        )
    message = item.get("message", item)
    return ("message", message.get("metadata"))


EVENTS = [
    ("status", "TASK_STATE_WORKING", None, None),
    ("status", "TASK_STATE_WORKING", META["working"], None),
    ("status", "TASK_STATE_WORKING", META["said"], ("ROLE_AGENT", META["message"])),
    ("artifact", META["artifact_event"], "meta-1", META["artifact"]),
    ("status", "TASK_STATE_COMPLETED", META["done"], None),
]


def received_by_agent(agent: Any) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(message metadata without the hub's fields, request metadata) of each message the
    agent received, and the hub's fields of those that came through the hub."""
    seen = []
    for message, request_metadata in zip(
        agent.state.messages, agent.state.request_metadata, strict=True
    ):
        metadata = dict(message.get("metadata", {}))
        metadata.pop("a2aHub", None)
        seen.append((metadata, request_metadata))
    return seen


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_blocking_answer_and_get_task_carry_what_the_agent_put_on_them(hub, sdk, binding):
    agent, _, _ = await hub.endpoint_agent("meta")
    _, token = await hub.caller("alpha")
    client = await sdk("meta", token, binding=binding)
    direct = await direct_client(hub, agent.url)

    through = MessageToDict(await send(client, metadata_request("meta")))
    straight = MessageToDict(await send(direct, metadata_request("meta")))

    assert through["metadata"] == straight["metadata"] == TASK_METADATA
    assert shape(through) == shape(straight)
    assert shape(through)[4:] == (
        [("meta-1", META["artifact"])],
        [("ROLE_USER", CALLER_MESSAGE), ("ROLE_AGENT", META["message"])],
    )
    got = MessageToDict(await client.get_task(GetTaskRequest(id=through["id"])))
    got_direct = MessageToDict(await direct.get_task(GetTaskRequest(id=straight["id"])))
    assert shape(got) == shape(got_direct) == shape(through)
    # The caller's metadata reached the agent as the caller sent it, through the hub with the
    # hub's fields besides.
    assert received_by_agent(agent) == [(CALLER_MESSAGE, CALLER_REQUEST)] * 2
    assert agent.state.messages[0]["metadata"]["a2aHub"]["taskId"] == through["id"]
    assert "a2aHub" not in agent.state.messages[1]["metadata"]


async def test_a_stream_relays_every_event_s_metadata_as_the_agent_streamed_it(hub, sdk):
    agent, _, _ = await hub.endpoint_agent("meta")
    _, token = await hub.caller("alpha")
    client = await sdk("meta", token, streaming=True)
    direct = await direct_client(hub, agent.url, streaming=True)

    through = await collect(client.send_message(metadata_request("meta")))
    straight = await collect(direct.send_message(metadata_request("meta")))

    assert [shape(e) for e in through[1:]] == [shape(e) for e in straight[1:]] == EVENTS
    # The hub answers a stream with its task before the agent answers: the agent's task
    # metadata is the task's from its first answer on.
    task_id, direct_id = through[0]["task"]["id"], straight[0]["task"]["id"]
    got = MessageToDict(await client.get_task(GetTaskRequest(id=task_id)))
    got_direct = MessageToDict(await direct.get_task(GetTaskRequest(id=direct_id)))
    assert got["metadata"] == TASK_METADATA
    assert shape(got) == shape(got_direct)
    assert received_by_agent(agent) == [(CALLER_MESSAGE, CALLER_REQUEST)] * 2


async def test_a_stream_relays_a_status_that_changes_nothing_as_the_agent_streamed_it(hub, sdk):
    # The agent answers with its task (submitted), says submitted once more, then works: the
    # caller through the hub gets the same events after the first as the agent's own caller.
    agent, _, _ = await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client = await sdk("echo", token, streaming=True)
    direct = await direct_client(hub, agent.url, streaming=True)

    through = await collect(client.send_message(request("resubmit now")))
    straight = await collect(direct.send_message(request("resubmit now")))

    def kinds(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
        return [
            ("status", e["statusUpdate"]["status"]["state"])
            if "statusUpdate" in e
            else ("artifact", e["artifactUpdate"]["artifact"]["parts"][0]["text"])
            for e in events[1:]
        ]

    assert (
        kinds(through)
        == kinds(straight)
        == [
            ("status", "TASK_STATE_SUBMITTED"),
            ("status", "TASK_STATE_WORKING"),
            ("artifact", "echo: resubmit now"),
            ("status", "TASK_STATE_COMPLETED"),
        ]
    )


async def test_subscribers_and_push_notifications_get_the_agent_s_event_metadata(
    hub, sdk, settings
):
    settings.HUB_PUSH_ALLOWED_HOSTS = ["127.0.0.1"]
    hook = Webhook()
    try:
        agent, _, _ = await hub.endpoint_agent("meta")
        _, token = await hub.caller("alpha")
        client = await sdk("meta", token)
        watcher = await sdk("meta", token, streaming=True)
        direct = await direct_client(hub, agent.url, streaming=True)

        task = await send(client, metadata_request("meta gate", return_immediately=True))
        await client.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=task.id, url=hook.url, token="k" * 32)
        )

        async def working() -> str:
            row = await stored_task(task.id)
            return row.remote_task_id if META["working"].items() <= row.metadata.items() else ""

        remote_id = await eventually(working)
        through_stream = watcher.subscribe(SubscribeToTaskRequest(id=task.id))
        direct_stream = direct.subscribe(SubscribeToTaskRequest(id=remote_id))
        first = MessageToDict(await anext(through_stream))
        first_direct = MessageToDict(await anext(direct_stream))
        agent.state.gate.set()
        through, straight = await asyncio.gather(collect(through_stream), collect(direct_stream))

        # Joined while the task works: the task so far, then the events after it. (The
        # agent's history holds the message the hub forwarded, with the hub's fields.)
        assert shape(first)[:5] == shape(first_direct)[:5]
        assert shape(first)[5] == [("ROLE_USER", CALLER_MESSAGE)]
        assert first["task"]["metadata"] == {**META["task"], **META["working"]}
        assert [shape(e) for e in through] == [shape(e) for e in straight] == EVENTS[2:]

        async def pushed_to_the_end() -> list[Any]:
            events = [r.event for r in hook.accepted]
            done = any("TASK_STATE_COMPLETED" in str(e) for e in events)
            return events if done else []

        assert [shape(e) for e in await eventually(pushed_to_the_end, within=15)] == EVENTS
    finally:
        hook.stop()


async def test_a_message_answer_keeps_its_metadata_blocking_streamed_and_in_the_task(hub, sdk):
    agent, _, _ = await hub.endpoint_agent("meta")
    _, token = await hub.caller("alpha")
    client = await sdk("meta", token)
    streaming = await sdk("meta", token, streaming=True)
    direct = await direct_client(hub, agent.url)

    through = MessageToDict(await send(client, metadata_request("metareply hi")))
    straight = MessageToDict(await send(direct, metadata_request("metareply hi")))
    assert through["metadata"] == straight["metadata"] == META["message"]

    # Through the hub a stream is a task's: the answer is its final status's message.
    events = await collect(streaming.send_message(metadata_request("metareply hi")))
    final = events[-1]["statusUpdate"]["status"]
    assert final["state"] == "TASK_STATE_COMPLETED"
    assert final["message"]["metadata"] == META["message"]
    got = MessageToDict(await client.get_task(GetTaskRequest(id=events[0]["task"]["id"])))
    assert shape(got)[5] == [("ROLE_USER", CALLER_MESSAGE), ("ROLE_AGENT", META["message"])]
    assert received_by_agent(agent) == [(CALLER_MESSAGE, CALLER_REQUEST)] * 3


async def test_a_message_approved_later_reaches_the_agent_with_the_caller_s_metadata(hub, sdk):
    await db(
        policy_publish,
        document={"matrix": [{"caller": "alpha", "target": "meta", "action": "approve"}]},
        reason="test",
        actor_label="test",
    )
    agent, _, _ = await hub.endpoint_agent("meta")
    _, token = await hub.caller("alpha")
    client = await sdk("meta", token)
    held = await send(client, metadata_request("meta"))
    assert held.status.state == TaskState.TASK_STATE_AUTH_REQUIRED
    escalation = await db(lambda: Escalation.objects.get(task_id=held.id))

    await db(escalation_approve, escalation_id=escalation.pk, actor_label="operator")

    async def completed() -> dict[str, Any] | None:
        task = MessageToDict(await client.get_task(GetTaskRequest(id=held.id)))
        return task if task["status"]["state"] == "TASK_STATE_COMPLETED" else None

    done = await eventually(completed)
    assert received_by_agent(agent) == [(CALLER_MESSAGE, CALLER_REQUEST)]
    assert done["metadata"] == TASK_METADATA


async def test_a_broadcast_reaches_endpoint_agents_with_the_caller_s_metadata(hub, sdk):
    agents = [(await hub.endpoint_agent(f"svc-{i}"))[0] for i in range(2)]
    _, token = await hub.caller("lead")
    sent = fan_out(broadcast("all"))
    sent.message.metadata.update(CALLER_MESSAGE)
    sent.metadata.update(CALLER_REQUEST)

    await send(await sdk("", token), sent)

    async def received() -> bool:
        return all(agent.state.messages for agent in agents)

    await eventually(received)
    for agent in agents:
        assert received_by_agent(agent) == [(CALLER_MESSAGE, CALLER_REQUEST)]
        assert agent.state.messages[0]["metadata"]["a2aHub"]["fanOut"] is True


async def test_the_hub_s_key_is_the_hub_s_and_a_delegated_task_shows_both(hub, sdk):
    await hub.endpoint_agent("meta")
    _, _, boss_token = await hub.endpoint_agent("boss")
    _, token = await hub.caller("alpha")
    client = await sdk("meta", token)
    streaming = await sdk("meta", token, streaming=True)

    # An agent writing under the hub's key: nothing of it reaches the caller.
    task = MessageToDict(await send(client, request("meta hub")))
    events = await collect(streaming.send_message(request("meta hub")))
    assert shape(task)[2:] == (
        TASK_METADATA,
        None,
        [("meta-1", META["artifact"])],
        [("ROLE_USER", None), ("ROLE_AGENT", META["message"])],
    )
    assert [shape(e) for e in events[1:]] == EVENTS

    # A task delegated through the hub: the agent's metadata and the hub's fields beside it.
    parent = await send(await sdk("boss", token), request("delegate meta meta"))
    child = await db(lambda: Task.objects.get(parent_id=parent.id))
    seen = MessageToDict(
        await (await sdk("meta", boss_token)).get_task(GetTaskRequest(id=child.pk))
    )
    hub_fields = seen["metadata"].pop("a2aHub")
    assert seen["metadata"] == TASK_METADATA
    assert (hub_fields["parentTaskId"], hub_fields["rootTaskId"]) == (parent.id, parent.id)


async def test_an_artifact_s_chunks_each_keep_their_metadata_and_the_artifact_all_of_it(hub, sdk):
    agent, _, _ = await hub.endpoint_agent("meta")
    _, token = await hub.caller("alpha")
    client = await sdk("meta", token, streaming=True)
    direct = await direct_client(hub, agent.url, streaming=True)

    through = await collect(client.send_message(request("metachunks")))
    straight = await collect(direct.send_message(request("metachunks")))

    chunks = [{k: v} for k, v in META["chunks"].items()]
    assert [shape(e)[3] for e in through if "artifactUpdate" in e] == chunks
    assert [shape(e)[3] for e in straight if "artifactUpdate" in e] == chunks
    got = MessageToDict(await client.get_task(GetTaskRequest(id=through[0]["task"]["id"])))
    got_direct = MessageToDict(await direct.get_task(GetTaskRequest(id=straight[0]["task"]["id"])))
    assert shape(got)[4] == shape(got_direct)[4] == [("chunks-1", META["chunks"])]


async def test_an_inbox_agent_s_metadata_reaches_callers_and_the_caller_s_reaches_it(hub, sdk):
    registration = await db(register, "duc", inbox=True)
    inbox = await Inbox.open(hub.url, "duc", registration.token)
    _, token = await hub.caller("alpha")
    client = await sdk("duc", token, streaming=True)

    async def report(frame: dict[str, Any]) -> None:
        answer = await inbox.send(frame)
        assert answer["type"] == "ok", answer

    async def agent() -> dict[str, Any]:
        delivery = await inbox.next_of("delivery")
        task_id = delivery["taskId"]
        await report(
            {"type": "status", "taskId": task_id, "state": "working", "metadata": META["working"]}
        )
        await report(
            {
                "type": "status",
                "taskId": task_id,
                "state": "working",
                "text": "said",
                "metadata": META["said"],
                "messageMetadata": META["message"],
            }
        )
        await report(
            {
                "type": "artifact",
                "taskId": task_id,
                "artifactId": "meta-1",
                "parts": [{"text": "with metadata"}],
                "metadata": META["artifact"],
            }
        )
        await report(
            {"type": "status", "taskId": task_id, "state": "completed", "metadata": META["done"]}
        )
        return delivery

    events, delivery = await asyncio.gather(
        collect(client.send_message(metadata_request("meta"))), agent()
    )

    assert delivery["message"]["metadata"] == CALLER_MESSAGE
    assert delivery["requestMetadata"] == CALLER_REQUEST
    assert [shape(e) for e in events[1:]] == [
        EVENTS[1],
        EVENTS[2],
        ("artifact", None, "meta-1", META["artifact"]),
        EVENTS[4],
    ]
    got = MessageToDict(await client.get_task(GetTaskRequest(id=delivery["taskId"])))
    assert got["metadata"] == {**META["working"], **META["said"], **META["done"]}
