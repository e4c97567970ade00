"""People told when an escalation waits: a message held by the live hub reaches a real local
webhook receiver (Slack format, and signed JSON) and a real local SMTP server, each with a
link to it, the agent's words escaped for each; a failing target is retried with backoff, and
what failed shows on its page; a slow target delays nobody else; a webhook the hub would not
POST to is refused when it is added, and checked again before each POST."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management.base import CommandError
from django.test import Client

from a2a_core.asyncdb import db
from a2a_core.client.webhooks import verify
from a2a_core.models import Notification, NotificationTarget
from a2a_core.services.users import user_create
from tests.a2a_core.cli.helpers import a2a, run_cli
from tests.a2a_core.notify.conftest import hold, hold_one, holding, notify_test
from tests.a2a_core.protocol.helpers import eventually
from tests.a2a_core.push.conftest import SPELLINGS, Webhook, refusal
from tests.servers import free_port

pytestmark = pytest.mark.live


async def test_a_held_message_produces_a_slack_post_and_an_email_each_with_the_link(
    hub, sdk, webhook, smtp, quick
):
    slack = webhook()
    out = await db(a2a, "notify", "add", "webhook", slack.url, "--format", "slack")
    assert re.match(r"added webhook target \d+: http://127\.0\.0\.1:\d+/", out), out
    await db(a2a, "notify", "add", "email", "ops@example.com")

    escalation = await hold_one(hub, sdk, "drop the staging database")
    link = f"{hub.url}/escalations/{escalation.pk}/"

    async def posted() -> list[Any]:
        return slack.accepted

    [post] = await eventually(posted)
    body = json.loads(post.body)
    assert list(body) == ["text"]
    assert "held message from alpha arrived" in body["text"]
    assert "drop the staging database" in body["text"] and link in body["text"]

    async def mailed() -> list[Any]:
        return smtp.messages

    [mail] = await eventually(mailed)
    assert mail["To"] == "ops@example.com"
    assert "held message from alpha arrived" in mail["Subject"]
    assert link in mail.get_payload()

    # Each target's row says when it was last reached (the hub records it just after).
    async def listed() -> str:
        listing = await db(a2a, "notify", "list")
        return listing if "never" not in listing else ""

    assert "ops@example.com" in await eventually(listed)


async def test_a_json_target_gets_the_escalation_signed_like_push_notifications(
    hub, sdk, webhook, quick
):
    receiver = webhook()
    out = await db(a2a, "notify", "add", "webhook", receiver.url, "--format", "json")
    secret = out.splitlines()[1].removeprefix("signing secret: ")
    escalation = await hold_one(hub, sdk, "rotate the root key")

    async def posted() -> list[Any]:
        return receiver.accepted

    [post] = await eventually(posted)
    verify(post.body, post.headers["x-a2a-signature"], secret)
    body = json.loads(post.body)
    assert body["event"] == "escalation.arrived"
    assert body["escalation"]["id"] == escalation.pk
    assert body["escalation"]["agent"] == "alpha"
    assert body["link"] == f"{hub.url}/escalations/{escalation.pk}/"


def admin_page() -> str:
    """The notification targets page, as an admin sees it."""
    if not User.objects.filter(username="root").exists():
        user_create(username="root", password="a-long-test-password-2026", role="admin")
    client = Client()
    client.login(username="root", password="a-long-test-password-2026")
    return client.get("/escalations/notify/").content.decode()


@pytest.mark.django_db
def test_every_spelling_of_an_internal_webhook_is_refused_when_it_is_added(settings):
    settings.HUB_NOTIFY_ALLOWED_HOSTS = []
    refused = {}
    for spelling in [*SPELLINGS, "[::1]", "[::ffff:127.0.0.1]"]:
        with pytest.raises(CommandError) as error:
            a2a("notify", "add", "webhook", f"http://{spelling}:8080/hook")
        refused[spelling] = str(error.value)

    expected = {
        spelling: "webhook address refused; address: "
        + refusal(spelling, address, "HUB_NOTIFY_ALLOWED_HOSTS")
        for spelling, address in SPELLINGS.items()
    }
    for literal in ("::1", "::ffff:127.0.0.1"):
        expected[f"[{literal}]"] = (
            f"webhook address refused; address: {literal} is a loopback address; the hub only "
            "POSTs to public addresses (an operator can allow it with HUB_NOTIFY_ALLOWED_HOSTS)"
        )
    assert refused == expected
    assert not NotificationTarget.objects.exists()


async def test_a_target_allowed_when_added_is_checked_again_before_each_post(
    hub, sdk, webhook, quick
):
    """DNS can change after a target is added, so the check before each POST stays; here the
    allow-list changes instead."""
    quick.HUB_NOTIFY_ALLOWED_HOSTS = ["127.0.0.0/8"]
    inside = webhook()
    await db(a2a, "notify", "add", "webhook", inside.url)
    quick.HUB_NOTIFY_ALLOWED_HOSTS = []
    await hold_one(hub, sdk, "open the firewall")

    async def refused() -> NotificationTarget | None:
        target = await db(lambda: NotificationTarget.objects.get(address=inside.url))
        return target if target.failures else None

    target = await eventually(refused)
    reason = (
        "127.0.0.1 is a loopback address; the hub only POSTs to public addresses "
        "(an operator can allow it with HUB_NOTIFY_ALLOWED_HOSTS)"
    )
    assert target.last_error == reason and inside.received == []
    assert reason in await db(admin_page)
    with pytest.raises(CommandError, match=r"failed: 127\.0\.0\.1 is a loopback address"):
        await notify_test(target.pk)

    quick.HUB_NOTIFY_ALLOWED_HOSTS = ["127.0.0.0/8"]
    await notify_test(target.pk)
    assert len(inside.accepted) == 1


# An agent's words, written to abuse Slack's markup: mentions of everyone, a user, a channel,
# a link dressed as something else, formatting, a backtick to end a code span, line breaks and
# a right-to-left override.
ABUSIVE = (
    "Approve <!channel> <!here> <@U024BE7LH> <#C024BE7LR|general> "
    "<https://evil.example/approve|Approve here> & *now* `x`\nBcc: evil@example.com\u202e"
)


async def test_agent_text_reaches_slack_escaped_with_the_hubs_link_the_only_link(
    hub, sdk, webhook, smtp, quick
):
    slack = webhook()
    await db(a2a, "notify", "add", "webhook", slack.url)
    await db(a2a, "notify", "add", "email", "ops@example.com")
    escalation = await hold_one(hub, sdk, ABUSIVE)

    async def posted() -> list[Any]:
        return slack.accepted

    [post] = await eventually(posted)
    deadline = escalation.deadline.strftime("%Y-%m-%d %H:%M UTC")
    link = f"{hub.url}/escalations/{escalation.pk}/"
    assert json.loads(post.body) == {
        "text": "A2A Hub: normal held message from alpha arrived: "
        "`Approve &lt;!channel&gt; &lt;!here&gt; &lt;@U024BE7LH&gt; &lt;#C024BE7LR|general&gt; "
        "&lt;https://evil.example/approve|Approve here&gt; &amp; *now* 'x' "
        f"Bcc: evil@example.com` (deadline {deadline}) <{link}|open it>"
    }

    async def mailed() -> list[Any]:
        return smtp.messages

    [mail] = await eventually(mailed)
    assert mail["Subject"] == "A2A Hub: normal held message from alpha arrived"
    assert mail["Bcc"] is None and mail.get_content_type() == "text/plain"
    assert (
        "Approve <!channel> <!here> <@U024BE7LH> <#C024BE7LR|general> "
        "<https://evil.example/approve|Approve here> & *now* `x` Bcc: evil@example.com "
        f"(deadline {deadline})"
    ) in mail.get_payload(decode=True).decode()


# How long the slow receiver takes to answer each POST.
SLOW = 8.0


class SlowWebhook(Webhook):
    """A receiver that answers each POST only after SLOW seconds (at once once released)."""

    def __post_init__(self) -> None:
        self.released = threading.Event()
        self.started = 0
        super().__post_init__()

    async def _hook(self, request: Any) -> Any:
        self.started += 1
        await asyncio.to_thread(self.released.wait, SLOW)
        return await super()._hook(request)

    def stop(self) -> None:
        self.released.set()
        super().stop()


async def test_a_slow_target_delays_no_other_targets_notifications(hub, sdk, webhook, quick):
    quick.HUB_NOTIFY_TIMEOUT = 30  # the slow one is slow, not failing
    slow = SlowWebhook()
    try:
        fast = webhook()
        await db(a2a, "notify", "add", "webhook", slow.url)
        await db(a2a, "notify", "add", "webhook", fast.url)
        alpha = await holding(hub, sdk)
        await hold(alpha, "first: rotate the keys")

        async def both_reached() -> bool:
            return len(fast.accepted) == 1 and slow.started == 1

        await eventually(both_reached)
        await hold(alpha, "second: rotate them again")

        async def fast_told_again() -> list[Any]:
            return fast.accepted if len(fast.accepted) == 2 else []

        # The slow receiver is still holding its first POST: the fast one is told anyway,
        # well within a quarter of that receiver's delay.
        [_, second] = await eventually(fast_told_again, within=SLOW / 4)
        assert "second: rotate them again" in json.loads(second.body)["text"]
        assert slow.accepted == []
    finally:
        slow.stop()


async def test_a_failing_target_is_retried_and_what_failed_is_reported(
    hub, sdk, webhook, quick, caplog
):
    caplog.set_level(logging.INFO)
    flaky = webhook(statuses=[500, 503])
    flaky.url += "?key=zz-secret-one-zz"
    await db(a2a, "notify", "add", "webhook", flaky.url)
    gone = f"http://127.0.0.1:{free_port()}/hook?key=zz-secret-two-zz"  # nothing listens
    await db(a2a, "notify", "add", "webhook", gone)
    await hold_one(hub, sdk, "restart production")

    async def retried_then_ok() -> list[Any]:
        return flaky.accepted

    await eventually(retried_then_ok)
    assert [r.answered for r in flaky.received] == [500, 503, 200]

    async def given_up() -> NotificationTarget | None:
        target = await db(lambda: NotificationTarget.objects.get(address=gone))
        return target if target.failures else None

    dead = await eventually(given_up)
    assert dead.last_error.startswith("could not connect")
    note = await db(lambda: Notification.objects.get(target=dead))
    assert (note.state, note.attempts) == ("failed", 3)
    ok = await db(lambda: NotificationTarget.objects.get(address=flaky.url))
    assert ok.last_ok_at is not None and ok.last_error == "HTTP 503"

    page = await db(admin_page)
    assert "could not connect" in page and "HTTP 503" in page
    with pytest.raises(
        CommandError, match=r"test to http://127\.0\.0\.1:\d+/…o-zz failed: could not connect"
    ):
        await notify_test(dead.pk)
    # Webhook URLs (and the secrets they may hold) reach no log, and no page.
    assert "notification not delivered" in caplog.text
    assert "zz-secret" not in caplog.text and "zz-secret" not in page


def test_pages_and_lists_show_a_webhook_without_the_secret_in_its_path():
    target = NotificationTarget(
        kind="webhook", address="https://hooks.slack.com/services/T0001/B0002/s3cr3tT0k3nXYZ"
    )
    assert target.shown_address == "https://hooks.slack.com/…nXYZ"


async def test_notify_test_from_a_shell_reports_what_the_running_hub_does(hub, webhook, quick):
    """The CLI's own environment refuses loopback webhooks; the hub's allows this one. The
    test is sent by the hub, so it is delivered, and the CLI says so."""
    receiver = webhook()
    await db(a2a, "notify", "add", "webhook", receiver.url)
    target = await db(NotificationTarget.objects.get)
    shell = {"HUB_NOTIFY_ALLOWED_HOSTS": "", "HUB_NOTIFY_TIMEOUT": "0.001"}
    done = await asyncio.to_thread(
        run_cli, "notify", "test", str(target.pk), "--wait", "20", env=shell
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (f"the hub sent a test POST to {target.shown_address}: delivered")
    [post] = receiver.accepted
    assert "A2A Hub can reach you here." in json.loads(post.body)["text"]


@pytest.mark.django_db
def test_notify_test_without_a_running_hub_says_so_and_keeps_it_queued():
    target = NotificationTarget.objects.create(kind="email", address="ops@example.com")
    with pytest.raises(CommandError) as error:
        a2a("notify", "test", str(target.pk), "--wait", "0.2")
    assert str(error.value) == (
        "no running hub sent the test within 0.2s: is the hub running (a2a serve, ./hub run) "
        "with this database? It stays queued and goes when one runs."
    )
    assert Notification.objects.get().state == "pending"
