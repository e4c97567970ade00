"""End-to-end tests: real headless Chromium against the live hub, with real agents talking.

`dashboard("operator")` logs a fresh browser context in through the login form and returns its
page. Every test can save screenshots with `shot(page, "name")`: they land in
artifacts/screenshots/ (kept by CI).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, Page, async_playwright, expect

from a2a_core.asyncdb import db
from a2a_core.services.users import user_create

CHROMIUM = os.environ.get("HUB_CHROMIUM", "/usr/bin/chromium")
SCREENSHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"
PASSWORD = "a-long-test-password-2026"

pytestmark = pytest.mark.live

# What a page shows is awaited as long as what it does (`set_default_timeout` below): on a
# loaded machine a bulk decision's answer or a live update can take longer than Playwright's
# 5 s, and a shorter wait only turns slowness into a failure.
expect.set_options(timeout=10_000)


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        yield browser
        await browser.close()


@pytest.fixture
async def dashboard(hub, browser) -> Callable[..., Awaitable[Page]]:
    """`await dashboard("viewer")` -> a page logged in as a new user with that role."""
    made: dict[str, int] = {}

    async def open_as(role: str, *, name: str | None = None, **context: Any) -> Page:
        made[role] = made.get(role, 0) + 1
        username = name or (role if made[role] == 1 else f"{role}{made[role]}")
        await db(user_create, username=username, password=PASSWORD, role=role)
        page = await (
            await browser.new_context(viewport={"width": 1280, "height": 900}, **context)
        ).new_page()
        page.set_default_timeout(10_000)
        await page.goto(f"{hub.url}/login/")
        await page.fill("input[name=username]", username)
        await page.fill("input[name=password]", PASSWORD)
        await page.click("button[type=submit]")
        await page.wait_for_url(f"{hub.url}/")
        return page

    return open_as


async def shot(page: Page, name: str) -> None:
    """Save a full-page screenshot as artifacts/screenshots/<name>.png."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


async def live(page: Page) -> None:
    """Wait until the page's websocket to the hub is open."""
    await page.wait_for_selector("body[data-live=open]", state="attached")
