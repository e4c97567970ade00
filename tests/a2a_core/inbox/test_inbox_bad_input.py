"""The inbox websocket refuses what it cannot take, says why, and changes nothing."""

from __future__ import annotations

import json

import pytest
import websockets

from a2a_core.asyncdb import db
from a2a_core.models import Delivery, InboxSession, Task, TaskEvent
from tests.a2a_core.inbox.helpers import Inbox
from tests.a2a_core.inbox.test_inbox_agents import inbox_agent, status
from tests.a2a_core.protocol.helpers import eventually, request, send
from tests.factories import register

pytestmark = pytest.mark.live


async def refused(hub, slug: str, token: str | None) -> tuple[dict, int]:
    """(the error frame, the close code) of a connection the hub refuses."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with websockets.connect(
        hub.url.replace("http://", "ws://") + f"/ws/agents/{slug}/", additional_headers=headers
    ) as ws:
        frame = json.loads(await ws.recv())
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await ws.recv()
    return frame, closed.value.rcvd.code


async def test_no_forged_or_foreign_token_opens_an_inbox(hub):
    _, duc = await inbox_agent("duc")
    _, eve = await inbox_agent("eve")
    endpoint = await db(register, "bob")

    frame, code = await refused(hub, "duc", None)
    assert (frame["code"], code) == ("unauthenticated", 4401)
    frame, code = await refused(hub, "duc", "a2ah_forged")
    assert (frame["code"], code) == ("unauthenticated", 4401)
    frame, code = await refused(hub, "duc", eve)
    assert (frame["code"], code) == ("permission_denied", 4403)
    assert "belongs to eve, not duc" in frame["message"]
    frame, code = await refused(hub, "nobody", duc)
    assert (frame["code"], code) == ("not_found", 4404)
    frame, code = await refused(hub, "bob", endpoint.token)
    assert (frame["code"], code) == ("not_an_inbox_agent", 4409)
    assert await db(InboxSession.objects.count) == 0


@pytest.fixture
async def connected(hub, sdk):
    """duc connected with one delivery received; alpha's client; eve's token."""
    _, duc = await inbox_agent("duc")
    _, eve = await inbox_agent("eve")
    _, alpha = await hub.caller("alpha")
    client = await sdk("duc", alpha)
    inbox = await Inbox.open(hub.url, "duc", duc)
    task = await send(client, request("job", return_immediately=True))
    delivery = await inbox.next_of("delivery")
    yield inbox, task, delivery, eve, client
    await inbox.close()


async def _state() -> list:
    return await db(
        lambda: [
            list(Task.objects.values_list("pk", "state")),
            list(TaskEvent.objects.values_list("task_id", "seq")),
            list(Delivery.objects.values_list("pk", "state", "attempts")),
        ]
    )


async def test_malformed_frames_are_answered_with_errors_and_the_socket_stays_open(connected):
    inbox, task, *_ = connected
    before = await _state()
    answer = await inbox.send("{not json")
    assert (answer["type"], answer["code"], answer["message"]) == (
        "error",
        "invalid",
        "malformed frame",
    )
    answer = await inbox.send({"type": "dance", "ref": 7})
    assert (
        answer["ref"] == 7
        and "valid: ack, status, artifact, ping" in answer["errors"][0]["message"]
    )
    answer = await inbox.send(
        {"type": "status", "taskId": task.id, "state": "sleeping", "ref": "s1"}
    )
    assert answer["ref"] == "s1"
    assert [e["field"] for e in answer["errors"]] == ["state"]
    answer = await inbox.send(
        {"type": "artifact", "taskId": task.id, "parts": [{"txt": "typo"}], "extra": 1}
    )
    assert {e["field"] for e in answer["errors"]} == {"parts", "extra"}
    assert (
        "parts[0] is not an A2A Part"
        in answer["errors"][0]["message"] + answer["errors"][1]["message"]
    )
    answer = await inbox.send({"type": "ack"})
    assert "deliveryId or deliveryIds" in answer["errors"][0]["message"]
    assert await inbox.send({"type": "ping", "ref": 1}) == {"type": "pong", "ref": 1}
    assert await _state() == before


async def test_acking_a_delivery_that_is_not_yours_changes_nothing(hub, connected):
    _, task, delivery, eve, _ = connected
    before = await _state()
    eves = await Inbox.open(hub.url, "eve", eve)
    answer = await eves.send({"type": "ack", "deliveryIds": [delivery["deliveryId"], 999999]})
    assert (answer["code"], answer["details"]["deliveryIds"]) == (
        "not_found",
        [delivery["deliveryId"], 999999],
    )
    answer = await eves.send({"type": "status", "taskId": task.id, "state": "completed"})
    assert (answer["code"], answer["message"]) == (
        "not_found",
        f"task {task.id} is not assigned to you",
    )
    await eves.close()
    assert await _state() == before


async def test_a_status_the_state_machine_forbids_is_refused(connected):
    inbox, task, *_ = connected
    await inbox.send({"type": "status", "taskId": task.id, "state": "completed", "text": "done"})
    before = await _state()
    answer = await inbox.send({"type": "status", "taskId": task.id, "state": "working"})
    assert answer["code"] == "illegal_transition"
    assert "already completed" in answer["message"]
    answer = await inbox.send({"type": "artifact", "taskId": task.id, "parts": [{"text": "more"}]})
    assert answer["code"] == "illegal_transition"
    assert await _state() == before


async def test_an_oversized_frame_closes_the_socket(connected, settings):
    inbox, *_ = connected
    settings.HUB_MAX_BODY_BYTES = 1000
    await inbox.ws.send(json.dumps({"type": "ping", "pad": "x" * 2000}))
    frame = await inbox.next()
    assert frame["code"] == "too_large"
    with pytest.raises(websockets.ConnectionClosed) as closed:
        await inbox.ws.recv()
    assert closed.value.rcvd.code == 1009


async def test_an_agent_that_vanishes_before_the_hub_answers_is_offline_with_no_session_left(
    connected,
):
    inbox, task, *_ = connected
    assert await status("duc") == "online"

    # A report the hub answers after writing it, and the connection dropped at once (no
    # closing handshake): the hub's answer finds the socket gone.
    await inbox.ws.send(json.dumps({"type": "status", "taskId": task.id, "state": "working"}))
    inbox.ws.transport.abort()

    async def session_gone() -> bool:
        return not await db(InboxSession.objects.exists)

    await eventually(session_gone, within=5)
    assert await status("duc") == "offline"
    stored = await db(lambda: Task.objects.get(pk=task.id).state)
    assert stored == "working"  # what arrived before the drop is kept
