"""Everything that crosses the hub is announced on the channel layer after it is committed."""

from __future__ import annotations

import pytest

from a2a_core import events
from a2a_core.asyncdb import db
from a2a_core.models import Message as MessageRow
from tests.a2a_core.protocol.helpers import eventually, request, send

pytestmark = pytest.mark.live


@pytest.fixture
def heard():
    seen: list[tuple[str, dict]] = []

    def listener(group: str, payload: dict) -> None:
        seen.append((group, payload))

    events.add_local_listener(listener)
    yield seen
    events.remove_local_listener(listener)


async def test_a_call_is_announced_to_traffic_and_its_task(hub, sdk, heard):
    _, echo, _ = await hub.endpoint_agent("echo")
    alpha, token = await hub.caller("alpha")
    task = await send(await sdk("echo", token), request("echo hi", message_id="announced"))

    async def completed_announced():
        return any(
            group == "traffic"
            and any(
                i.get("state") == "completed" and i.get("task_id") == task.id for i in p["items"]
            )
            for group, p in heard
        )

    await eventually(completed_announced)
    stored = await db(
        lambda: list(MessageRow.objects.filter(task_id=task.id).values_list("pk", "direction"))
    )
    traffic = [item for group, p in heard if group == "traffic" for item in p["items"]]
    announced = {(i["message_pk"], i["direction"]) for i in traffic if i["type"] == "message"}
    assert announced == set(stored)  # every stored message, and each exactly as stored
    # A page about one agent picks its items out of `traffic`: each names the agents involved.
    messages = [i for i in traffic if i["type"] == "message"]
    assert {(i["sender_id"], i["target_id"]) for i in messages} >= {(alpha.pk, echo.pk)}
    assert f"task.{task.id}" in {group for group, _ in heard}
    wakeups = [p["seq"] for group, p in heard if group == f"task.{task.id}"]
    assert wakeups == sorted(wakeups)
    # Events carry plain values only, never model instances (the Redis layer must carry them).
    for _, payload in heard:
        assert all(
            isinstance(v, (str, int, float, bool, list, dict, type(None))) for v in payload.values()
        )
