"""The overview in a real browser: its numbers and its feed follow the traffic without a reload."""

from __future__ import annotations

import re
from typing import Any

import pytest
from a2a.client import A2AClientError
from playwright.async_api import Page, expect

from a2a_core.asyncdb import db
from a2a_core.services.policy import policy_publish
from tests.a2a_core.protocol.helpers import request, send
from tests.agents import ScriptedAgent
from tests.e2e.conftest import live, shot
from tests.servers import free_port

pytestmark = pytest.mark.live

POLICY = {
    "breaker": {"failureThreshold": 1, "cooldownSeconds": 600},
    "matrix": [
        {"caller": "beta", "target": "echo", "action": "deny"},
        {"caller": "alpha", "target": "reviewer", "action": "approve"},
    ],
}


async def some_traffic(hub: Any, sdk: Any) -> None:
    """Delivered, rejected, held and failed calls: every tile has something to show."""
    await db(policy_publish, document=POLICY, reason="test", actor_label="test")
    await hub.endpoint_agent("echo")
    await hub.endpoint_agent("reviewer")
    down = ScriptedAgent("down", port=free_port())  # registered, never started
    await hub.register_card(down.card_json)
    _, alpha = await hub.caller("alpha")
    _, beta = await hub.caller("beta")
    for text in ("echo hello", "echo again", "reply quickly", "slow 0.2"):
        await send(await sdk("echo", alpha), request(text))
    await send(await sdk("reviewer", alpha), request("echo please review"))  # held
    for target, token in (("echo", beta), ("down", alpha)):
        with pytest.raises(A2AClientError):
            await send(await sdk(target, token), request("echo refused"))


async def rate(page: Page) -> int:
    return int(await page.locator("#stat-rate .value").inner_text())


async def test_the_numbers_and_the_feed_follow_the_traffic_live(hub, sdk, dashboard):
    await hub.endpoint_agent("echo")
    _, alpha = await hub.caller("alpha")
    page = await dashboard("viewer")  # the overview is the home page
    await live(page)
    await expect(page.locator("#stat-rate .value")).to_have_text("0")
    await page.evaluate("window.sameDocument = true")

    await send(await sdk("echo", alpha), request("echo hello from alpha"))

    await expect(page.locator("#stat-rate .value")).not_to_have_text("0")
    assert await rate(page) >= 1
    row = page.locator("#feed-rows tr[data-message]", has_text="alpha").first
    await row.wait_for()
    assert "echo" in await row.inner_text()
    await expect(page.locator("#stat-latency .value")).to_contain_text("ms")
    assert await page.evaluate("window.sameDocument === true")  # no reload


async def test_a_busy_hour_at_a_glance(hub, sdk, dashboard):
    await some_traffic(hub, sdk)
    page = await dashboard("viewer")
    await live(page)

    await expect(page.locator("#stat-breakers .value")).to_have_text("1")
    await expect(page.locator("#stat-breakers")).to_contain_text("down")
    await expect(page.locator("#stat-escalations .value")).to_have_text("1")
    await expect(page.locator("#rejections")).to_contain_text("denied_by_matrix")
    await expect(page.locator("#decisions [data-decision=hold]")).to_contain_text("1")
    assert await page.locator("#decisions .stacked a").count() >= 3
    await expect(page.locator("#stat-rate .chart-axis")).to_contain_text("30 min")
    await shot(page, "overview")

    # Each bar leads to the audit log, filtered to what it counts.
    await page.locator("#rejections a", has_text="denied_by_matrix").click()
    await expect(page).to_have_url(re.compile(r"/audit/\?.*reason=denied_by_matrix"))
    rows = page.locator("#audit-rows tr[data-message]")
    await expect(rows).to_have_count(1)
    await expect(rows).to_contain_text("denied_by_matrix")


async def test_the_overview_in_dark_mode(hub, sdk, dashboard):
    await some_traffic(hub, sdk)
    page = await dashboard("viewer", color_scheme="dark")
    await live(page)
    await expect(page.locator("#stat-breakers .value")).to_have_text("1")
    background = await page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(15, 19, 24)"  # the dark --bg
    await shot(page, "overview-dark")
