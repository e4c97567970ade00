"""When the live feed sends a row: as soon as the browsers have taken the frame before it, not
when a coalescing window ends."""

from __future__ import annotations

import asyncio
import re

import pytest
import redis.asyncio
import websockets
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.conf import settings

from a2a_core.asyncdb import db
from a2a_core.models import Message
from a2a_core.services.users import user_create
from dashboard import live
from tests.a2a_core.protocol.helpers import request, send
from tests.dashboard.test_live_security import PASSWORD, session_cookie, socket_url

pytestmark = pytest.mark.live

ROW = re.compile(r'data-message="[^"]+"|badge completed task-state-[^"\s]+')


async def echo_and_viewer(hub, sdk):
    """An echo agent and a client calling it; a signed-in viewer's session cookie."""
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client = await sdk("echo", token)
    await db(user_create, username="vera", password=PASSWORD, role="viewer")
    return client, await session_cookie(hub.url, "vera")


async def test_rows_in_quick_succession_are_not_held_for_the_coalescing_window(
    hub, sdk, monkeypatch
):
    # A window nobody would wait for: a row that waited for it would never arrive.
    monkeypatch.setattr(live, "FLUSH_SECONDS", 3600.0)
    client, cookie = await echo_and_viewer(hub, sdk)

    async with websockets.connect(
        socket_url(hub.url), origin=hub.url, additional_headers={"Cookie": cookie}
    ) as socket:
        seen: set[str] = set()

        async def rows_of(task_id: str) -> None:
            # A call's request is drawn when it is accepted, its task's state on that row
            # when the agent's answer is recorded: two events, moments apart.
            (pk,) = await db(
                lambda: list(Message.objects.filter(task_id=task_id).values_list("pk", flat=True))
            )
            wanted = {f'data-message="{pk}"', f"badge completed task-state-{task_id}"}
            while not wanted <= seen:
                seen.update(ROW.findall(str(await socket.recv())))

        for i in range(3):
            answer = await send(client, request(f"echo {i}"))
            await asyncio.wait_for(rows_of(answer.id), 20)


def _live_relays() -> list[live.Relay]:
    return [relay for loop, relay in live._relays.items() if not loop.is_closed()]


async def _traffic_listeners() -> int:
    """Who listens to the hub's traffic events: the in-memory layer's members of the group,
    or Redis's subscribers to it."""
    layer = get_channel_layer()
    if isinstance(layer, InMemoryChannelLayer):
        return len(layer.groups.get("traffic", {}))
    client = redis.asyncio.from_url(settings.REDIS_URL)
    try:
        ((_, count),) = await client.pubsub_numsub(f"{settings.HUB_CHANNEL_PREFIX}__group__traffic")
        return int(count)
    finally:
        await client.aclose()


async def _until(condition, seconds: float = 10) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not await condition() and loop.time() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.1)


async def test_the_relay_listens_only_while_someone_looks_and_a_returning_browser_gets_rows(
    hub, sdk, monkeypatch
):
    monkeypatch.setattr(live, "IDLE_SECONDS", 1.0)
    client, cookie = await echo_and_viewer(hub, sdk)

    async def a_row_arrives(text: str) -> None:
        async with websockets.connect(
            socket_url(hub.url), origin=hub.url, additional_headers={"Cookie": cookie}
        ) as socket:
            answer = await send(client, request(text))
            wanted = f"badge completed task-state-{answer.id}"

            async def row() -> None:
                while wanted not in ROW.findall(str(await socket.recv())):
                    pass

            await asyncio.wait_for(row(), 20)

    await a_row_arrives("first look")
    (relay,) = _live_relays()
    listening = list(relay.tasks)
    assert listening
    listeners = await _traffic_listeners()
    assert listeners >= 1
    # A reload comes back within IDLE_SECONDS: the same relay, still subscribed.
    await a_row_arrives("a reload")
    assert relay.tasks == listening

    # Nobody looks: the relay leaves the hub's event groups.
    async def stopped() -> bool:
        return not relay.tasks and await _traffic_listeners() < listeners

    await _until(stopped)
    assert relay.tasks == []
    assert all(task.done() for task in listening)
    assert await _traffic_listeners() == listeners - 1

    # The next browser starts it again and gets the rows of what happens from then on.
    await a_row_arrives("back again")
    assert relay.tasks and relay.tasks != listening
