"""An email's Approve link in a real browser: the operator it was sent to opens it logged in,
sees the held message and what the link will do, confirms, and the item is approved under
her name; the same link then says it was used."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from playwright.async_api import expect

from a2a_core.asyncdb import db
from a2a_core.models import Escalation
from tests.a2a_core.cli.helpers import a2a
from tests.a2a_core.notify.conftest import Mailbox, hold, holding
from tests.a2a_core.protocol.helpers import eventually
from tests.e2e.conftest import shot
from tests.servers import free_port

pytestmark = pytest.mark.live


@pytest.fixture
def mailbox(settings, hub) -> Iterator[Mailbox]:
    received = Mailbox()
    controller = Controller(received, hostname="127.0.0.1", port=free_port())
    controller.start()
    settings.MAILERS = {
        "default": {
            "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
            "OPTIONS": {"host": "127.0.0.1", "port": controller.port, "timeout": 5},
        }
    }
    settings.HUB_DASHBOARD_URL = hub.url
    yield received
    controller.stop()


async def test_an_operator_approves_from_her_emails_link_in_the_browser(
    hub, sdk, dashboard, mailbox
):
    page = await dashboard("operator", name="olga")
    await db(a2a, "notify", "add", "email", "olga@example.com", "--user", "olga")
    alpha = await holding(hub, sdk)
    item = await hold(alpha, "publish the quarterly numbers")

    async def mailed() -> list[Any]:
        return mailbox.messages

    [mail] = await eventually(mailed)
    body = mail.get_payload(decode=True).decode()
    [approve] = re.findall(r"^Approve: (\S+)", body, re.M)

    await page.goto(approve)
    await expect(page.locator("h1")).to_have_text("Approve this held message?")
    await expect(page.locator("#notify-act-item")).to_contain_text("publish the quarterly numbers")
    await expect(page.locator("#notify-act-status")).to_have_text("pending")
    await shot(page, "notify-email-link-confirm")
    await page.get_by_role("button", name="Approve as olga").click()
    await expect(page.locator("h1")).to_have_text("Approved")
    await expect(page.get_by_role("status")).to_contain_text("Approved by olga.")
    await shot(page, "notify-email-link-approved")
    decided = await db(Escalation.objects.get, pk=item.pk)
    assert (decided.status, decided.decided_by_name) == ("approved", "olga")

    await page.goto(approve)
    await expect(page.locator("#notify-act-error")).to_have_text(
        "This link was already used: each link works once."
    )
