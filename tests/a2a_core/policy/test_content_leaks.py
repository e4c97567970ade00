"""Nothing a content rule caught is kept or shown in clear: not in the database, the log, the
export, the live events or the dashboard — whichever way it came and went."""

from __future__ import annotations

import codecs
import io
import logging
from typing import Any

import pytest
from a2a.client import A2AClientError
from a2a.types.a2a_pb2 import SendMessageRequest
from django.apps import apps
from django.core.management import call_command
from django.db import models
from django.test import Client

from a2a_core import events
from a2a_core.asyncdb import db
from a2a_core.models import Escalation, Message, Task
from a2a_core.services.escalations import escalation_approve
from a2a_core.services.policy import policy_publish
from a2a_core.services.users import user_create
from tests.a2a_core.protocol.helpers import eventually, request, send

pytestmark = pytest.mark.live

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
CARD = "4111 1111 1111 1111"
CARD_DIGITS = "4111111111111111"
TOKEN = "ghp_" + "Zq8vN3xK5mT2wR7yB4cH9jL6pD1sF0gA3eU5"
TICKET = "TICKET-4821"
SECRETS = (AWS_KEY, CARD, CARD_DIGITS, TOKEN, TICKET)

RULES = [
    {"name": "cloud keys", "detect": "secrets", "action": "hold"},
    {"name": "cards", "detect": "card", "direction": "both", "action": "redact"},
    {"name": "answer secrets", "detect": "secrets", "direction": "answer", "action": "redact"},
    {
        "name": "tickets",
        "detect": "pattern",
        "pattern": "TICKET-[0-9]{4}",
        "action": "reject",
        "reason": "ticket ids stay inside",
    },
]


def text_columns() -> list[tuple[type[models.Model], list[str]]]:
    """Every model with its text-like columns (strings and JSON)."""
    found = []
    for model in apps.get_models():
        names = [
            f.attname
            for f in model._meta.concrete_fields
            if isinstance(f, models.CharField | models.TextField | models.JSONField)
        ]
        if names:
            found.append((model, names))
    return found


def leaks_in_database() -> list[str]:
    leaks = []
    for model, names in text_columns():
        for row in model.objects.values_list("pk", *names).iterator():
            text = str(row[1:])
            leaks += [f"{model.__name__}#{row[0]}: {s}" for s in SECRETS if s in text]
    return leaks


def dashboard_pages(task_ids: list[str], message_pks: list[int]) -> str:
    admin = user_create(username="auditor", password="a-long-test-password-2026", role="admin")
    client = Client()
    client.force_login(admin)
    urls = [
        "/",
        "/traffic/",
        "/tasks/",
        "/audit/",
        "/audit/export.jsonl",
        "/audit/training.jsonl",
        "/escalations/",
        "/policy/",
        *(f"/tasks/{task_id}/" for task_id in task_ids),
        *(f"/messages/{pk}/" for pk in message_pks),
        *(f"/escalations/{e.pk}/" for e in Escalation.objects.all()),
    ]
    pages = []
    for url in urls:
        response = client.get(url)
        assert response.status_code == 200, url
        body = b"".join(response.streaming_content) if response.streaming else response.content
        pages.append(body.decode())
    return "\n".join(pages)


async def test_nothing_caught_reaches_the_database_log_export_events_or_dashboard(hub, sdk, caplog):
    caplog.set_level(logging.DEBUG)
    heard: list[Any] = []

    def listen(group: str, payload: Any) -> None:
        heard.append((group, payload))

    events.add_local_listener(listen)
    try:
        await db(
            policy_publish,
            document={"contentRules": RULES},
            reason="guardrails",
            actor_label="test",
        )
        echo, _, _ = await hub.endpoint_agent("echo")
        _, token = await hub.caller("alpha")
        client = await sdk("echo", token)
        streaming = await sdk("echo", token, streaming=True)

        hidden = codecs.encode(f"your token is {TOKEN}", "rot13")  # no detector sees it

        held = await send(client, request(f"echo the key {AWS_KEY}"))
        await send(client, request(f"echo pay with {CARD}"))
        reply = await send(client, request(f"rot13reply {hidden}"))
        answered = await send(client, request(f"rot13 {hidden}"))
        streamed = [
            event
            async for event in streaming.send_message(
                SendMessageRequest(message=request(f"rot13 {hidden}").message)
            )
        ]
        with pytest.raises(A2AClientError):
            await send(client, request(f"echo about {TICKET}"))
        escalation = await db(lambda: Escalation.objects.get(task_id=held.id))
        await db(escalation_approve, escalation_id=escalation.pk, actor_label="ops")
        await eventually(lambda: _done(held.id))

        # The agent got the approved original, and the card redacted; the caller got the
        # agent's answers redacted, however they came.
        said = [p.get("text", "") for m in echo.state.messages for p in m["parts"]]
        assert f"echo the key {AWS_KEY}" in said
        assert "echo pay with [redacted: card]" in said
        assert [p.text for p in reply.parts] == ["your token is [redacted: secret]"]
        assert [p.text for a in answered.artifacts for p in a.parts] == [
            "your token is [redacted: secret]"
        ]
        assert "your token is [redacted: secret]" in str(streamed)
        assert TOKEN not in str(streamed)

        leaks = await db(leaks_in_database)
        out = io.StringIO()
        await db(lambda: call_command("a2a", "export", stdout=out))
        training = io.StringIO()
        await db(lambda: call_command("a2a", "export", "--format", "training", stdout=training))
        tasks = await db(lambda: list(Task.objects.values_list("pk", flat=True)))
        messages = await db(lambda: list(Message.objects.values_list("pk", flat=True)))
        pages = await db(dashboard_pages, tasks, messages)
    finally:
        events.remove_local_listener(listen)

    assert leaks == []
    exported = out.getvalue() + training.getvalue()
    assert "[redacted: card]" in exported and "[redacted: secret]" in exported
    assert "[redacted: card]" in pages and "[redacted: secret]" in pages
    assert "cloud keys" in pages  # the inbox says which rule held it
    for name, text in (
        ("log", caplog.text),
        ("export", exported),
        ("events", repr(heard)),
        ("dashboard", pages),
    ):
        found = [line for line in text.splitlines() if any(s in line for s in SECRETS)]
        assert found == [], name


async def _done(task_id: str) -> bool:
    return await db(lambda: Task.objects.get(pk=task_id).state == "completed")
