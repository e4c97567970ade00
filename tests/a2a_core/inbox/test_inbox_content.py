"""Content rules with an inbox agent: what its websocket delivers, and what it reports."""

from __future__ import annotations

import pytest
from a2a.types.a2a_pb2 import GetTaskRequest

from a2a_core.asyncdb import db
from a2a_core.models import Escalation
from a2a_core.services.escalations import escalation_approve
from a2a_core.services.policy import policy_publish
from tests.a2a_core.inbox.helpers import Inbox
from tests.a2a_core.protocol.helpers import request, send
from tests.factories import register

pytestmark = pytest.mark.live

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
TOKEN = "ghp_" + "Zq8vN3xK5mT2wR7yB4cH9jL6pD1sF0gA3eU5"
RULES = [
    {"name": "cloud keys", "detect": "secrets", "action": "hold"},
    {"name": "cards", "detect": "card", "action": "redact"},
    {"name": "answer secrets", "detect": "secrets", "direction": "answer", "action": "redact"},
]


async def test_an_inbox_agent_gets_redactions_and_approved_originals_and_its_reports_are_masked(
    hub, sdk
):
    await db(policy_publish, document={"contentRules": RULES}, reason="t", actor_label="t")
    registration = await db(register, "duc", inbox=True)
    _, alpha = await hub.caller("alpha")
    inbox = await Inbox.open(hub.url, "duc", registration.token)
    client = await sdk("duc", alpha)

    await send(client, request("pay with 4111 1111 1111 1111", return_immediately=True))
    redacted = await inbox.next_of("delivery")
    held = await send(client, request(f"the key is {AWS_KEY}", return_immediately=True))
    escalation = await db(lambda: Escalation.objects.get(task_id=held.id))
    await db(escalation_approve, escalation_id=escalation.pk, actor_label="ops")
    original = await inbox.next_of("delivery")
    await inbox.send(
        {
            "type": "status",
            "taskId": original["taskId"],
            "state": "completed",
            "text": f"use {TOKEN} instead",
        }
    )

    assert redacted["message"]["parts"] == [{"text": "pay with [redacted: card]"}]
    assert original["message"]["parts"] == [{"text": f"the key is {AWS_KEY}"}]
    task = await client.get_task(GetTaskRequest(id=held.id))
    assert [p.text for p in task.status.message.parts] == ["use [redacted: secret] instead"]
