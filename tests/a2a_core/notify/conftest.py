"""Real local receivers for notification tests: an SMTP server (aiosmtpd) and webhook
receivers, the settings a live hub needs to reach them, and helpers that hold messages."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from email import message_from_bytes
from typing import Any

import pytest
from a2a.types.a2a_pb2 import TaskState
from aiosmtpd.controller import Controller
from django.db import connections

from a2a_core.asyncdb import db
from a2a_core.models import Escalation
from a2a_core.services.policy import policy_publish
from tests.a2a_core.cli.helpers import a2a
from tests.a2a_core.protocol.helpers import request, send
from tests.a2a_core.push.conftest import Webhook
from tests.servers import free_port


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
    # Each item its own message (the digest tests set their own interval).
    settings.HUB_NOTIFY_DIGEST_SECONDS = 0
    # The local receivers listen on loopback, which a notification may reach only when listed.
    settings.HUB_NOTIFY_ALLOWED_HOSTS = ["127.0.0.1"]
    return settings


async def notify_test(pk: int) -> str:
    """`a2a notify test PK` as from a shell beside the running hub: it waits for the hub (whose
    database thread it must not hold) to send the test."""

    def run() -> str:
        try:
            return a2a("notify", "test", str(pk), "--wait", "10")
        finally:
            connections.close_all()

    return await asyncio.to_thread(run)


async def holding(hub: Any, sdk: Any) -> Any:
    """An SDK client of the agent `alpha`, whose messages to `echo` are held for approval."""
    await db(
        policy_publish,
        document={"matrix": [{"caller": "alpha", "target": "echo", "action": "approve"}]},
        reason="hold alpha -> echo",
        actor_label="test",
    )
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    return await sdk("echo", token)


async def hold(client: Any, text: str) -> Escalation:
    task = await send(client, request(text))
    assert task.status.state == TaskState.TASK_STATE_AUTH_REQUIRED
    return await db(lambda: Escalation.objects.get(task_id=task.id))


async def hold_one(hub: Any, sdk: Any, text: str) -> Escalation:
    return await hold(await holding(hub, sdk), text)
