"""People told when an escalation waits: a message held by the live hub reaches a real local
webhook receiver (Slack format, and signed JSON) and a real local SMTP server, each with a
link to it; a failing target is retried with backoff, and what failed shows on its page."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from email import message_from_bytes
from typing import Any

import pytest
from a2a.types.a2a_pb2 import TaskState
from aiosmtpd.controller import Controller
from django.contrib.auth.models import User
from django.core.management.base import CommandError
from django.test import Client

from a2a_core.asyncdb import db
from a2a_core.client.webhooks import verify
from a2a_core.models import Escalation, Notification, NotificationTarget
from a2a_core.services.policy import policy_publish
from a2a_core.services.users import user_create
from tests.a2a_core.cli.helpers import a2a
from tests.a2a_core.protocol.helpers import eventually, request, send
from tests.a2a_core.push.conftest import Webhook
from tests.servers import free_port

pytestmark = pytest.mark.live


class Mailbox:
    """What a real SMTP server (aiosmtpd) on 127.0.0.1 received."""

    def __init__(self) -> None:
        self.messages: list[Any] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append(message_from_bytes(envelope.content))
        return "250 OK"


@pytest.fixture
def smtp(settings) -> Iterator[Mailbox]:
    mailbox = Mailbox()
    controller = Controller(mailbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    settings.MAILERS = {
        "default": {
            "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
            "OPTIONS": {"host": "127.0.0.1", "port": controller.port, "timeout": 5},
        }
    }
    yield mailbox
    controller.stop()


@pytest.fixture
def webhook() -> Iterator[Any]:
    """`webhook(statuses=[500, 503])` -> a real local receiver (see the push tests')."""
    started: list[Webhook] = []

    def start(**kwargs: Any) -> Webhook:
        started.append(Webhook(**kwargs))
        return started[-1]

    yield start
    for hook in started:
        hook.stop()


@pytest.fixture
def quick(settings, hub) -> Any:
    settings.HUB_DASHBOARD_URL = hub.url
    settings.HUB_NOTIFY_RETRY_SECONDS = 0.05
    settings.HUB_NOTIFY_MAX_ATTEMPTS = 3
    # The local receivers listen on loopback, which a notification may reach only when listed.
    settings.HUB_NOTIFY_ALLOWED_HOSTS = ["127.0.0.1"]
    return settings


async def hold_one(hub: Any, sdk: Any, text: str) -> Escalation:
    await db(
        policy_publish,
        document={"matrix": [{"caller": "alpha", "target": "echo", "action": "approve"}]},
        reason="hold alpha -> echo",
        actor_label="test",
    )
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    task = await send(await sdk("echo", token), request(text))
    assert task.status.state == TaskState.TASK_STATE_AUTH_REQUIRED
    return await db(lambda: Escalation.objects.get(task_id=task.id))


async def test_a_held_message_produces_a_slack_post_and_an_email_each_with_the_link(
    hub, sdk, webhook, smtp, quick
):
    slack = webhook()
    out = await db(a2a, "notify", "add", "webhook", slack.url, "--format", "slack")
    assert re.match(r"added webhook target \d+: http://127\.0\.0\.1:\d+/", out), out
    await db(a2a, "notify", "add", "email", "ops@example.com")

    escalation = await hold_one(hub, sdk, "drop the staging database")
    link = f"{hub.url}/escalations/#escalation-{escalation.pk}"

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
    listing = await db(a2a, "notify", "list")
    assert "ops@example.com" in listing and "never" not in listing.splitlines()[2]


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
    assert body["link"] == f"{hub.url}/escalations/#escalation-{escalation.pk}"


def admin_page() -> str:
    """The notification targets page, as an admin sees it."""
    if not User.objects.filter(username="root").exists():
        user_create(username="root", password="a-long-test-password-2026", role="admin")
    client = Client()
    client.login(username="root", password="a-long-test-password-2026")
    return client.get("/escalations/notify/").content.decode()


async def test_a_loopback_target_is_refused_at_send_time_unless_allow_listed(
    hub, sdk, webhook, quick
):
    quick.HUB_NOTIFY_ALLOWED_HOSTS = []
    inside = webhook()
    await db(a2a, "notify", "add", "webhook", inside.url)  # admins may add it: sending checks
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
        await db(a2a, "notify", "test", str(target.pk))

    quick.HUB_NOTIFY_ALLOWED_HOSTS = ["127.0.0.0/8"]
    await db(a2a, "notify", "test", str(target.pk))
    assert len(inside.accepted) == 1


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
        await db(a2a, "notify", "test", str(dead.pk))
    # Webhook URLs (and the secrets they may hold) reach no log, and no page.
    assert "notification not delivered" in caplog.text
    assert "zz-secret" not in caplog.text and "zz-secret" not in page


def test_pages_and_lists_show_a_webhook_without_the_secret_in_its_path():
    target = NotificationTarget(
        kind="webhook", address="https://hooks.slack.com/services/T0001/B0002/s3cr3tT0k3nXYZ"
    )
    assert target.shown_address == "https://hooks.slack.com/…nXYZ"
