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
from a2a_core.models import Escalation, NotificationTarget
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


async def test_an_admin_sees_how_each_target_is_told_and_changes_its_rules(hub, dashboard):
    page = await dashboard("admin", name="ada")
    await db(a2a, "notify", "add", "email", "oncall@example.com", "--user", "ada")
    oncall = await db(NotificationTarget.objects.get)
    hook = "https://hooks.slack.com/services/T0/B0/XXXX"
    await db(
        a2a,
        "notify",
        "add",
        "webhook",
        hook,
        "--pair",
        "lead:reviewer",
        "--digest",
        "120",
        "--pass-to",
        str(oncall.pk),
        "--pass-after",
        "15",
    )
    slack = await db(NotificationTarget.objects.get, address=hook)
    await page.goto(f"{hub.url}/escalations/notify/")
    row = page.locator(f"#notify-target-{slack.pk}")
    await expect(row.locator(".notify-how")).to_contain_text(
        f"digest every 120s, about pairs lead:reviewer, unanswered after 15 min: passed to {oncall.pk}"
    )
    await row.locator("summary", has_text="Change").click()
    await row.locator("input[name=priorities]").fill("urgent")
    await shot(page, "notify-targets-change")
    await row.get_by_role("button", name="Save").click()
    await expect(page.get_by_role("status")).to_have_text(
        "Saved how https://hooks.slack.com/…XXXX is told."
    )
    await expect(page.locator(f"#notify-target-{slack.pk} .notify-how")).to_contain_text(
        "about pairs lead:reviewer; priorities urgent"
    )


async def test_a_digest_email_as_posted_leads_to_the_inbox_filtered_to_its_items(
    hub, sdk, dashboard, mailbox, settings
):
    """Six held messages within the interval: the first is told at once, the other five come as
    one digest, the identical ones folded; its link opens the inbox filtered to them."""
    settings.HUB_NOTIFY_DIGEST_SECONDS = 3600
    page = await dashboard("operator", name="olga")
    await db(a2a, "notify", "add", "email", "olga@example.com", "--user", "olga")
    alpha = await holding(hub, sdk)
    await hold(alpha, "publish the quarterly numbers")

    async def mailed() -> list[Any]:
        return mailbox.messages

    await eventually(mailed)
    for text in ["rotate the signing key"] * 3 + ["delete the staging bucket"] * 2:
        await hold(alpha, text)
    # The interval shortened: what waits goes now, as one digest.
    target = await db(NotificationTarget.objects.get)
    await db(a2a, "notify", "set", str(target.pk), "--digest", "0")

    async def digest() -> list[Any]:
        return mailbox.messages[1:]

    [mail] = await eventually(digest)
    body = mail.get_payload(decode=True).decode()
    assert re.search(r"^- 5 held messages alpha -> echo arrived", body, re.M), body
    await page.set_content(
        "<title>digest</title><h1 style='font:600 15px sans-serif'>"
        f"{mail['Subject']}</h1><pre style='font:13px monospace;white-space:pre-wrap'>"
        + body.replace("&", "&amp;").replace("<", "&lt;")
        + "</pre>"
    )
    await expect(page.locator("pre")).to_contain_text("rotate the signing key")
    await shot(page, "notify-digest-email")

    links = set(re.findall(r"(https?://\S+/escalations/\?\S+)", body))
    assert links == {f"{hub.url}/escalations/?pair=alpha%3Aecho&kind=approval"}, body
    [link] = links
    await page.goto(link)
    await expect(page.locator("body")).to_contain_text("rotate the signing key")
    await expect(page.locator("body")).to_contain_text("delete the staging bucket")
    await shot(page, "notify-digest-link-opened")
