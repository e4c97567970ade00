"""When the live feed sends a row: as soon as the browsers have taken the frame before it, not
when a coalescing window ends."""

from __future__ import annotations

import asyncio
import re

import pytest
import websockets

from a2a_core.asyncdb import db
from a2a_core.models import Message
from a2a_core.services.users import user_create
from dashboard import live
from tests.a2a_core.protocol.helpers import request, send
from tests.dashboard.test_live_security import PASSWORD, session_cookie, socket_url

pytestmark = pytest.mark.live

ROW = re.compile(r'data-message="[^"]+"|badge completed task-state-[^"\s]+')


async def test_rows_in_quick_succession_are_not_held_for_the_coalescing_window(
    hub, sdk, monkeypatch
):
    # A window nobody would wait for: a row that waited for it would never arrive.
    monkeypatch.setattr(live, "FLUSH_SECONDS", 3600.0)
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client = await sdk("echo", token)
    await db(user_create, username="vera", password=PASSWORD, role="viewer")
    cookie = await session_cookie(hub.url, "vera")

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
