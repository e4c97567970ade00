"""A Google ADK agent (`to_a2a`, a canned model) behind the hub: the `adk_*` metadata it puts on
its tasks and events reaches an a2a-sdk caller as it does calling the agent directly, on every
path, and the caller's request metadata reaches the agent."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from a2a.types.a2a_pb2 import GetTaskRequest, SubscribeToTaskRequest, TaskPushNotificationConfig
from google.protobuf.json_format import MessageToDict

from tests.a2a_core.protocol.helpers import collect, eventually, send, stored_task
from tests.a2a_core.protocol.test_metadata import (
    CALLER_MESSAGE,
    CALLER_REQUEST,
    direct_client,
    metadata_request,
    shape,
)
from tests.a2a_core.push.conftest import Webhook
from tests.peers import PeerProcess, peer_python
from tests.servers import free_port

pytestmark = pytest.mark.live

# Fresh for every call the agent serves: compared as placeholders.
PER_CALL = ("adk_invocation_id", "adk_event_id")


@pytest.fixture(scope="module")
def adk() -> Iterator[dict[str, Any]]:
    """The ADK agent served by uvicorn in its own environment; its card as it serves it."""
    python = peer_python("adk", ["google-adk[a2a]==2.13.0", "uvicorn"])
    port = free_port()
    peer = PeerProcess(python, "adk_agent.py", str(port)).wait_port(port)
    try:
        url = f"http://127.0.0.1:{port}"
        yield httpx.get(f"{url}/.well-known/agent-card.json").json()
    finally:
        peer.stop()


def _find(value: Any, key: str) -> Any:
    if isinstance(value, dict):
        if key in value:
            return value[key]
        value = list(value.values())
    if isinstance(value, list | tuple):
        for item in value:
            if (found := _find(item, key)) is not None:
                return found
    return None


def comparable(value: Any) -> Any:
    """`value` with what differs between two calls to the agent as placeholders: its context
    id (ADK names its session after it) and the per-call ids."""
    context = _find(value, "adk_session_id")

    def walk(item: Any, key: str = "") -> Any:
        if key in PER_CALL:
            return "<per call>"
        if isinstance(item, dict):
            return {k: walk(v, k) for k, v in item.items()}
        if isinstance(item, list | tuple):
            return [walk(v) for v in item]
        if isinstance(item, str) and context:
            return item.replace(context, "<context>")
        return item

    return walk(value)


def adk_shape(item: dict[str, Any]) -> Any:
    """`shape` of a task or event, `comparable`, and ADK's artifact ids (fresh per call) left
    out."""
    found = comparable(shape(item))
    if found[0] == "task":
        found[4] = [metadata for _, metadata in found[4]]
    elif found[0] == "artifact":
        del found[2]
    return found


def asked_with(metadata: dict[str, Any]) -> Any:
    """The request metadata ADK received, as it reports it in the task's metadata."""
    return json.loads(metadata["adk_custom_metadata"])["a2a_metadata"]


async def registered(hub: Any, card: dict[str, Any]) -> tuple[Any, Any]:
    await hub.register_card(card)
    _, token = await hub.caller("alpha")
    return token, card["name"]


async def test_a_blocking_answer_and_get_task_carry_adk_s_metadata(hub, sdk, adk):
    token, slug = await registered(hub, adk)
    client = await sdk(slug, token)
    direct = await direct_client(hub, adk["supportedInterfaces"][0]["url"])

    through = MessageToDict(await send(client, metadata_request("hello")))
    straight = MessageToDict(await send(direct, metadata_request("hello")))

    assert {"adk_app_name", "adk_session_id", "adk_invocation_id"} <= through["metadata"].keys()
    assert adk_shape(through) == adk_shape(straight)
    # ADK names its session after its own context id: through the hub, the agent's, untouched.
    row = await stored_task(through["id"])
    assert through["metadata"]["adk_session_id"] == row.remote_context_id
    assert asked_with(through["metadata"]) == asked_with(straight["metadata"]) == CALLER_REQUEST
    assert shape(through)[5][0] == ("ROLE_USER", CALLER_MESSAGE)
    got = MessageToDict(await client.get_task(GetTaskRequest(id=through["id"])))
    got_direct = MessageToDict(await direct.get_task(GetTaskRequest(id=straight["id"])))
    assert adk_shape(got) == adk_shape(got_direct) == adk_shape(through)


async def test_a_stream_and_get_task_carry_adk_s_metadata(hub, sdk, adk):
    token, slug = await registered(hub, adk)
    client = await sdk(slug, token, streaming=True)
    direct = await direct_client(hub, adk["supportedInterfaces"][0]["url"], streaming=True)

    through = await collect(client.send_message(metadata_request("hello")))
    straight = await collect(direct.send_message(metadata_request("hello")))

    events = [adk_shape(e) for e in through[1:]]
    assert events == [adk_shape(e) for e in straight[1:]]
    assert [e[0] for e in events] == ["status", "status", "artifact", "status"]
    assert all(e[1 if e[0] == "artifact" else 2]["adk_app_name"] == slug for e in events)
    got = MessageToDict(await client.get_task(GetTaskRequest(id=through[0]["task"]["id"])))
    got_direct = MessageToDict(await direct.get_task(GetTaskRequest(id=straight[0]["task"]["id"])))
    assert "adk_event_id" in got["metadata"]
    assert adk_shape(got) == adk_shape(got_direct)


async def test_subscribers_and_push_notifications_get_adk_s_metadata(
    hub, sdk, adk, settings, tmp_path
):
    settings.HUB_PUSH_ALLOWED_HOSTS = ["127.0.0.1"]
    hook = Webhook()
    try:
        token, slug = await registered(hub, adk)
        client = await sdk(slug, token)
        watcher = await sdk(slug, token, streaming=True)
        direct = await direct_client(hub, adk["supportedInterfaces"][0]["url"], streaming=True)
        gate = tmp_path / "go"

        task = await send(client, metadata_request(f"wait {gate}", return_immediately=True))
        await client.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=task.id, url=hook.url, token="k" * 32)
        )

        async def working() -> str:
            row = await stored_task(task.id)
            return row.remote_task_id if "adk_session_id" in row.metadata else ""

        remote_id = await eventually(working)
        through_stream = watcher.subscribe(SubscribeToTaskRequest(id=task.id))
        direct_stream = direct.subscribe(SubscribeToTaskRequest(id=remote_id))
        first = MessageToDict(await anext(through_stream))
        first_direct = MessageToDict(await anext(direct_stream))
        gate.touch()
        through, straight = await asyncio.gather(collect(through_stream), collect(direct_stream))

        assert first["task"]["status"]["state"] == "TASK_STATE_WORKING"
        assert first["task"]["metadata"] == first_direct["task"]["metadata"]
        events = [adk_shape(e) for e in through]
        assert events == [adk_shape(e) for e in straight]
        assert [e[0] for e in events] == ["status", "artifact", "status"]

        async def pushed_to_the_end() -> list[Any]:
            pushed = [r.event for r in hook.accepted]
            return pushed if any("TASK_STATE_COMPLETED" in str(e) for e in pushed) else []

        pushed = [adk_shape(e) for e in await eventually(pushed_to_the_end, within=15)]
        assert pushed[1:] == events
        assert pushed[0] == [
            "status",
            "TASK_STATE_WORKING",
            comparable(first_direct["task"]["metadata"]),
            None,
        ]
    finally:
        hook.stop()
