"""How long a question to the humans, or a held message, stays open: the live policy says."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from a2a_core.asyncdb import db
from a2a_core.models import Escalation
from a2a_core.services.policy import policy_publish
from a2a_core.services.users import user_create
from tests.a2a_core.cli.helpers import a2a
from tests.a2a_core.inbox.helpers import Inbox
from tests.a2a_core.protocol.helpers import request, send
from tests.factories import register

pytestmark = pytest.mark.live


async def publish(document: dict[str, Any]) -> None:
    await db(policy_publish, document=document, reason="question deadlines", actor_label="test")


async def ask(inbox: Inbox, client: Any, text: str) -> Escalation:
    task = await send(client, request(text, return_immediately=True))
    await inbox.next_of("delivery")
    await inbox.send(
        {
            "type": "status",
            "taskId": task.id,
            "state": "input-required",
            "askHuman": True,
            "text": f"{text}: go ahead?",
        }
    )
    return await db(lambda: Escalation.objects.get(task_id=task.id))


def seconds_left(deadline: datetime | None) -> float:
    assert deadline is not None
    return (deadline - timezone.now()).total_seconds()


def inbox_page() -> str:
    operator = Client()
    operator.force_login(user_create(username="operator", password="x" * 20, role="operator"))
    return operator.get("/escalations/").content.decode()


async def test_a_question_gets_the_policys_deadline_and_a_change_applies_to_new_ones(hub, sdk):
    duc = await db(register, "duc", inbox=True)
    _, alpha = await hub.caller("alpha")
    client = await sdk("duc", alpha)
    inbox = await Inbox.open(hub.url, "duc", duc.token)
    await publish({"limits": {"questionDeadlineSeconds": 600}})

    first = await ask(inbox, client, "ship the release")
    assert 590 < seconds_left(first.deadline) <= 600
    page = await db(inbox_page)
    assert re.search(r'data-deadline="[^"]+" [^>]*>in (9|10)\xa0minutes<', page)
    listed = await db(a2a, "escalations")
    assert re.search(rf"^{first.pk} +question .* in (9m\d\d|10m00)s ", listed, re.M)

    # duc's own limits now say two hours: the next question gets them, the first keeps its.
    await publish({"agentLimits": {"duc": {"questionDeadlineSeconds": 7200}}})
    second = await ask(inbox, client, "ship the hotfix")
    assert 7190 < seconds_left(second.deadline) <= 7200
    listed = await db(a2a, "escalations")
    assert re.search(rf"^{second.pk} +question .* in 1h ", listed, re.M)
    assert seconds_left(await db(lambda: Escalation.objects.get(pk=first.pk).deadline)) > 580
    await inbox.close()


async def test_a_held_message_without_a_rule_deadline_waits_as_long_as_a_question(hub, sdk):
    await hub.endpoint_agent("echo")
    _, alpha = await hub.caller("alpha")
    await publish(
        {
            "matrix": [{"caller": "alpha", "target": "echo", "action": "approve"}],
            "agentLimits": {"alpha": {"questionDeadlineSeconds": 900}},
        }
    )
    await send(await sdk("echo", alpha), request("deploy now"))
    held = await db(lambda: Escalation.objects.get(kind="approval"))
    assert 890 < seconds_left(held.deadline) <= 900
