"""Live traffic in a real browser: a message appears without a reload, filters apply live."""

from __future__ import annotations

import re

import pytest
from playwright.async_api import expect

from tests.a2a_core.protocol.helpers import request, send
from tests.e2e.conftest import live, shot

pytestmark = pytest.mark.live


async def test_a_message_appears_live_in_the_feed(hub, sdk, dashboard):
    await hub.endpoint_agent("echo")
    _, alpha = await hub.caller("alpha")
    page = await dashboard("viewer")
    await page.goto(f"{hub.url}/traffic/")
    await live(page)
    assert await page.locator("#feed-rows tr[data-message]").count() == 0

    await send(await sdk("echo", alpha), request("echo hello from alpha"))

    row = page.locator("#feed-rows tr[data-message]").first
    await row.wait_for()
    assert "alpha" in await row.inner_text() and "echo" in await row.inner_text()
    # The request's row arrived before the answer; its latency fills in when the answer does.
    request_row = page.locator("#feed-rows tr[data-message]").last
    await expect(request_row.locator("td.right")).to_have_text(re.compile(r"^\d+ ms$"))
    await shot(page, "traffic")


async def test_a_live_filter_keeps_other_agents_rows_out(hub, sdk, dashboard):
    await hub.endpoint_agent("echo")
    _, alpha = await hub.caller("alpha")
    _, beta = await hub.caller("beta")
    page = await dashboard("viewer")
    await page.goto(f"{hub.url}/traffic/")
    await live(page)
    await page.select_option("select[name=agent]", "beta")
    await page.wait_for_timeout(300)  # the filter travels over the socket

    await send(await sdk("echo", alpha), request("echo from alpha"))
    await send(await sdk("echo", beta), request("echo from beta"))

    await page.locator("#feed-rows tr[data-message]", has_text="beta").first.wait_for()
    assert await page.locator("#feed-rows tr[data-message]", has_text="alpha").count() == 0
