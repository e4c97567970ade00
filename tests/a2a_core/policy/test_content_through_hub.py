"""Content rules, end to end: real a2a-sdk agents and client, the hub in between."""

from __future__ import annotations

from typing import Any

import pytest
from a2a.client import A2AClientError
from a2a.types.a2a_pb2 import Message as SdkMessage
from a2a.types.a2a_pb2 import TaskState
from google.protobuf.json_format import MessageToDict

from a2a_core.asyncdb import db
from a2a_core.models import Escalation, Message, PolicyVersion, Task
from a2a_core.selectors.policy_dry_run import policy_dry_run
from a2a_core.services.escalations import escalation_approve
from a2a_core.services.policy import policy_publish
from tests.a2a_core.protocol.helpers import eventually, request, send

pytestmark = pytest.mark.live

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
CARD = "4111 1111 1111 1111"
GITHUB_TOKEN = "ghp_" + "Zq8vN3xK5mT2wR7yB4cH9jL6pD1sF0gA3eU5"

HOLD_KEYS = {"name": "cloud keys", "detect": "secrets", "action": "hold"}
REDACT_CARDS = {"name": "cards", "detect": "card", "action": "redact", "examples": [CARD]}
ANSWER_SECRETS = {
    "name": "answer secrets",
    "detect": "secrets",
    "direction": "answer",
    "action": "redact",
}
TICKETS = {
    "name": "tickets",
    "detect": "pattern",
    "pattern": "TICKET-[0-9]{4}",
    "action": "reject",
    "reason": "internal ticket ids stay inside",
    "examples": ["see TICKET-1234"],
}


async def publish(*rules: dict[str, Any]) -> PolicyVersion:
    return await db(
        policy_publish,
        document={"contentRules": list(rules)},
        reason="content rules",
        actor_label="test",
    )


async def requests_to(slug: str) -> list[Message]:
    return await db(
        lambda: list(Message.objects.filter(target__slug=slug, direction="request").order_by("pk"))
    )


def texts_of(message: dict[str, Any]) -> list[str]:
    return [part.get("text", "") for part in message.get("parts", [])]


async def test_a_message_carrying_a_cloud_key_is_held_masked_and_goes_as_written_once_approved(
    hub, sdk
):
    await publish(HOLD_KEYS, ANSWER_SECRETS)
    echo, _, _ = await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")

    held = await send(await sdk("echo", token), request(f"echo my key is {AWS_KEY}"))

    assert held.status.state == TaskState.TASK_STATE_AUTH_REQUIRED
    assert echo.state.messages == []
    [row] = await requests_to("echo")
    assert (row.decision, row.decision_reason) == ("hold", "content_held")
    assert "content rule 'cloud keys' found secret" in row.decision_detail
    assert texts_of({"parts": row.parts}) == ["echo my key is [redacted: secret]"]
    assert row.content_findings == [
        {
            "rule": "cloud keys",
            "kind": "secret",
            "where": "parts[0].text",
            "start": 15,
            "length": 20,
        }
    ]
    assert row.sealed_parts and AWS_KEY not in row.sealed_parts
    escalation = await db(lambda: Escalation.objects.get(message=row))
    assert "cloud keys" in escalation.reason
    assert AWS_KEY not in escalation.question

    await db(escalation_approve, escalation_id=escalation.pk, actor_label="ops")

    await eventually(lambda: _true(bool(echo.state.messages)))
    assert texts_of(echo.state.messages[0]) == [f"echo my key is {AWS_KEY}"]
    task = await eventually(lambda: _completed(held.id))
    assert "[redacted: secret]" in str(task.artifacts_seen)
    assert AWS_KEY not in str(task.artifacts_seen)


async def _true(value: bool) -> bool:
    return value


async def _completed(task_id: str) -> Task | None:
    task = await db(lambda: Task.objects.prefetch_related("artifacts").get(pk=task_id))
    if task.state != "completed":
        return None
    task.artifacts_seen = [a.parts for a in task.artifacts.all()]  # type: ignore[attr-defined]
    return task


async def test_a_card_number_is_redacted_before_the_agent_receives_it(hub, sdk):
    await publish(REDACT_CARDS)
    echo, _, _ = await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")

    answer = await send(await sdk("echo", token), request(f"echo pay with {CARD} today"))

    assert answer.status.state == TaskState.TASK_STATE_COMPLETED
    assert texts_of(echo.state.messages[0]) == ["echo pay with [redacted: card] today"]
    said = [p.text for a in answer.artifacts for p in a.parts]
    assert said == ["echo: pay with [redacted: card] today"]
    [row] = await requests_to("echo")
    assert (row.decision, row.decision_reason) == ("deliver", "content_redacted")
    assert row.decision_detail == "redacted card by 'cards'"
    assert CARD not in str(row.parts) and CARD not in row.summary


async def test_a_card_number_in_a_data_part_is_redacted_at_any_depth(hub, sdk):
    await publish(REDACT_CARDS)
    echo, _, _ = await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    data = {"order": {"items": [{"pay": {"card": 4111111111111111, "name": "Jane"}}]}}
    message = request("echo order", parts=None)
    message.message.parts.add().data.struct_value.update(data)

    await send(await sdk("echo", token), message)

    got = echo.state.messages[0]["parts"][1]["data"]
    assert got == {"order": {"items": [{"pay": {"card": "[redacted: card]", "name": "Jane"}}]}}


async def test_an_agents_answer_carrying_a_secret_is_redacted_before_the_caller_receives_it(
    hub, sdk
):
    await publish(ANSWER_SECRETS)
    echo, _, _ = await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client = await sdk("echo", token)

    reply = await send(client, request(f"reply the token is {GITHUB_TOKEN}"))
    task = await send(client, request(f"echo the token is {GITHUB_TOKEN}"))

    assert isinstance(reply, SdkMessage)
    assert [p.text for p in reply.parts] == ["reply: the token is [redacted: secret]"]
    assert [p.text for a in task.artifacts for p in a.parts] == [
        "echo: the token is [redacted: secret]"
    ]
    # The request direction has no rule: the agent got the message as written.
    assert texts_of(echo.state.messages[0]) == [f"reply the token is {GITHUB_TOKEN}"]
    recorded = await db(
        lambda: [m.parts for m in Message.objects.filter(direction="reply").order_by("pk")]
    )
    assert GITHUB_TOKEN not in str(recorded)
    assert "[redacted: secret]" in str(recorded)


async def test_a_custom_pattern_rejects_the_message_with_its_reason(hub, sdk):
    await publish(TICKETS)
    echo, _, _ = await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")

    with pytest.raises(A2AClientError) as refused:
        await send(await sdk("echo", token), request("echo about TICKET-4821, urgent"))

    assert "content rule 'tickets' found tickets: internal ticket ids stay inside" in str(
        refused.value
    )
    assert echo.state.messages == []
    [row] = await requests_to("echo")
    assert (row.decision, row.decision_reason) == ("reject", "content_rejected")
    assert texts_of({"parts": row.parts}) == ["echo about [redacted: tickets], urgent"]


async def test_an_answer_a_pattern_rejects_fails_the_task_with_the_reason(hub, sdk):
    await publish({**TICKETS, "direction": "answer"})
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client = await sdk("echo", token)

    task = await send(client, request("echo see TICKET-1234"))
    reply = await send(client, request("reply see TICKET-1234"))

    assert task.status.state == TaskState.TASK_STATE_FAILED
    said = MessageToDict(task.status.message)["parts"][0]["text"]
    assert "content rule 'tickets' found tickets in echo's answer" in said
    assert "TICKET-1234" not in said
    assert list(task.artifacts) == []  # the agent's answer was not recorded
    assert reply.status.state == TaskState.TASK_STATE_FAILED
    stored = await db(lambda: [t.reason for t in Task.objects.order_by("created_at")])
    assert all("content_rejected" in reason for reason in stored)


async def test_the_dry_run_counts_each_rules_holds_redactions_and_rejections(hub, sdk):
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client = await sdk("echo", token)
    for text in (f"echo key {AWS_KEY}", f"echo card {CARD}", "echo TICKET-1234", "echo nothing"):
        await send(client, request(text))

    report = await db(policy_dry_run, document={"contentRules": [HOLD_KEYS, REDACT_CARDS, TICKETS]})

    assert report.content == {
        "cloud keys": {"hold": 1},
        "cards": {"redact": 1},
        "tickets": {"reject": 1},
    }
    assert report.reasons == {"content_held": 1, "content_redacted": 1, "content_rejected": 1}
