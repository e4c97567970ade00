"""A human's decision on a held message reaches a feed already open in a browser, in place:
the row then reads as a reload of the page draws it."""

from __future__ import annotations

import asyncio
import html
import re

import httpx
import pytest
import websockets

from a2a_core.asyncdb import db
from a2a_core.models import Escalation
from a2a_core.services.escalations import escalation_approve
from a2a_core.services.policy import policy_publish
from a2a_core.services.users import user_create
from tests.a2a_core.protocol.helpers import request, send
from tests.dashboard.test_live_security import PASSWORD, session_cookie, socket_url

pytestmark = pytest.mark.live


def decision_cell(page: str, message_pk: int) -> str:
    """The decision a page shows for the message: its badge and the reason, as text."""
    found = re.search(rf'<span class="decision-{message_pk}"[^>]*>(.*?</span>)</span>', page, re.S)
    assert found, f"no decision for message {message_pk}"
    return html.unescape(re.sub(r"<[^>]+>", "", found.group(1))).strip()


@pytest.fixture
async def held(hub, sdk) -> tuple[Escalation, str]:
    """A message alpha -> echo held for approval, and the session of a viewer."""
    await db(
        policy_publish,
        document={"matrix": [{"caller": "alpha", "target": "echo", "action": "approve"}]},
        reason="test",
        actor_label="test",
    )
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    task = await send(await sdk("echo", token), request("echo please"))
    escalation = await db(Escalation.objects.select_related("message").get, task_id=task.id)
    await db(user_create, username="vera", password=PASSWORD, role="viewer")
    return escalation, await session_cookie(hub.url, "vera")


async def test_an_open_feed_shows_a_held_messages_approval_as_a_reload_does(hub, held):
    escalation, cookie = held
    pk = escalation.message.pk
    async with websockets.connect(
        socket_url(hub.url), origin=hub.url, additional_headers={"Cookie": cookie}
    ) as socket:
        await db(escalation_approve, escalation_id=escalation.pk, actor_label="operator")

        async def decision_frame() -> str:
            while f"decision-{pk}" not in (frame := str(await socket.recv())):
                pass
            return frame

        frame = await asyncio.wait_for(decision_frame(), 20)

    assert f'hx-swap-oob="outerHTML:.decision-{pk}"' in frame
    assert f'data-message="{pk}"' not in frame  # the row is updated, not drawn again
    async with httpx.AsyncClient(base_url=hub.url, headers={"Cookie": cookie}) as http:
        reloaded = (await http.get("/traffic/")).text
    live = decision_cell(frame, pk)
    assert live.startswith("Delivered") and "approved by operator" in live
    assert live == decision_cell(reloaded, pk)


async def test_a_feed_of_held_messages_drops_the_row_once_a_human_approves_it(hub, held):
    escalation, cookie = held
    row = f'data-message="{escalation.message.pk}"'
    async with httpx.AsyncClient(base_url=hub.url, headers={"Cookie": cookie}) as http:
        assert row in (await http.get("/traffic/?decision=hold")).text

        async with websockets.connect(
            socket_url(hub.url) + "&decision=hold",
            origin=hub.url,
            additional_headers={"Cookie": cookie},
        ) as socket:
            await db(escalation_approve, escalation_id=escalation.pk, actor_label="operator")

            async def feed_drawn_anew() -> str:
                while 'id="feed-rows"' not in (frame := str(await socket.recv())):
                    pass
                return frame

            frame = await asyncio.wait_for(feed_drawn_anew(), 20)

        assert row not in frame
        assert row not in (await http.get("/traffic/?decision=hold")).text


async def test_an_open_inbox_is_told_which_items_were_decided_and_refreshes(hub, held):
    escalation, cookie = held
    async with websockets.connect(
        socket_url(hub.url, "escalations"), origin=hub.url, additional_headers={"Cookie": cookie}
    ) as socket:
        await db(escalation_approve, escalation_id=escalation.pk, actor_label="operator")

        async def decided_frame() -> str:
            while 'id="escalations-decided"' not in (frame := str(await socket.recv())):
                pass
            return frame

        frame = await asyncio.wait_for(decided_frame(), 20)
    # escalations.js drops the items named here from the page, then the list is drawn again.
    assert f'data-ids="{escalation.pk}"' in frame
    assert 'id="escalations-refresh"' in frame
