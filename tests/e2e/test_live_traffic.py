"""Live traffic in a real browser: a message appears without a reload, filters apply live."""

from __future__ import annotations

import re

import pytest
from playwright.async_api import expect

from a2a_core.asyncdb import db
from a2a_core.models import Message
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


async def feed_ids(page) -> list[str]:
    return await page.locator("#feed-rows tr:visible").evaluate_all(
        "rows => rows.map(r => r.dataset.message || ('other:' + r.className))"
    )


async def test_the_live_feed_shows_each_message_once_and_the_same_after_a_reload(
    hub, sdk, dashboard
):
    await hub.endpoint_agent("alpha")
    await hub.endpoint_agent("beta")
    _, token = await hub.caller("orchestrator")
    page = await dashboard("viewer")
    await page.goto(f"{hub.url}/traffic/")
    await live(page)

    await send(await sdk("alpha", token), request("delegate beta echo one hop down"))
    stored = await db(
        lambda: [
            str(pk)
            for pk in Message.objects.order_by("-created_at", "-id").values_list("pk", flat=True)
        ]
    )
    assert len(stored) >= 2

    rows = page.locator("#feed-rows tr:visible")
    await expect(rows).to_have_count(len(stored))
    await expect(page.locator("#feed-rows [class*=task-state-]").first).to_contain_text("completed")
    shown_live = await feed_ids(page)
    assert sorted(shown_live) == sorted(stored)
    await page.reload()
    assert await feed_ids(page) == stored
    assert shown_live == stored
    await shot(page, "feed")


async def test_feed_filters_for_pair_text_and_state_show_the_same_live_and_after_reload(
    hub, sdk, dashboard
):
    await hub.endpoint_agent("alpha")
    await hub.endpoint_agent("beta")
    _, token = await hub.caller("orchestrator")
    page = await dashboard("viewer")
    await page.goto(f"{hub.url}/traffic/")
    await live(page)
    await page.select_option("select[name=from]", "alpha")
    await page.select_option("select[name=to]", "beta")
    await page.select_option("select[name=state]", "completed")
    await page.fill("input[name=text]", "needle")
    await page.wait_for_timeout(500)  # the filter travels over the socket

    await send(await sdk("alpha", token), request("delegate beta echo hay"))
    await send(await sdk("alpha", token), request("delegate beta echo needle in it"))
    await send(await sdk("beta", token), request("echo needle alone"))

    rows = page.locator("#feed-rows tr[data-message]")
    await expect(rows).to_have_count(1)
    await expect(rows.first).to_contain_text("needle in it")
    await expect(rows.first).to_contain_text("completed")
    shown_live = await feed_ids(page)
    await page.goto(f"{hub.url}/traffic/?from=alpha&to=beta&state=completed&text=needle")
    assert await feed_ids(page) == shown_live
    # The reloaded page's live feed keeps to the same filters.
    await live(page)
    await send(await sdk("beta", token), request("echo needle again, from elsewhere"))
    await send(await sdk("alpha", token), request("delegate beta echo needle twice"))
    await expect(rows.first).to_contain_text("needle twice")
    await expect(rows).to_have_count(2)
    shown_live = await feed_ids(page)
    await page.reload()
    assert await feed_ids(page) == shown_live


async def test_pages_with_live_updates_log_no_errors_in_the_browser_console(hub, sdk, dashboard):
    await hub.endpoint_agent("echo")
    _, alpha = await hub.caller("alpha")
    _, beta = await hub.caller("beta")
    page = await dashboard("viewer")
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)

    await page.goto(f"{hub.url}/traffic/?agent=beta")
    await live(page)
    # alpha's requests are answered (their latencies updated) with no row of theirs on the page.
    for _ in range(3):
        await send(await sdk("echo", alpha), request("slow 0.1"))
    await send(await sdk("echo", beta), request("echo from beta"))
    await page.locator("#feed-rows tr[data-message]", has_text="beta").first.wait_for()
    await page.goto(f"{hub.url}/")
    await live(page)
    await send(await sdk("echo", alpha), request("echo on the overview"))
    await page.locator("#feed-rows tr[data-message]", has_text="on the overview").wait_for()

    assert errors == []
    # The page names its icon, so a browser that shows one asks for nothing that is missing.
    icon = await page.locator("link[rel=icon]").get_attribute("href")
    assert icon and (await page.request.get(f"{hub.url}{icon}")).status == 200
