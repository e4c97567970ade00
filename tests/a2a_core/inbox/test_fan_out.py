"""Broadcasts and knowledge shares: one message, a delivery per recipient, each on its own."""

from __future__ import annotations

from typing import Any

import pytest
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest
from a2a.utils.errors import InvalidParamsError, UnsupportedOperationError
from google.protobuf.json_format import MessageToDict, ParseDict

from a2a_core.asyncdb import db
from a2a_core.models import Delivery
from a2a_core.models import Message as MessageRow
from a2a_core.schemas.envelopes import ENVELOPE_EXTENSION, ENVELOPE_MEDIA_TYPE
from a2a_core.services.policy import policy_publish
from tests.a2a_core.inbox.helpers import Inbox
from tests.a2a_core.inbox.test_inbox_agents import inbox_agent
from tests.a2a_core.protocol.helpers import eventually, send
from tests.agents import ScriptedAgent
from tests.servers import free_port

pytestmark = pytest.mark.live


def fan_out(envelope: dict[str, Any], message_id: str = "b-1") -> SendMessageRequest:
    message = Message(message_id=message_id, role=Role.ROLE_USER, extensions=[ENVELOPE_EXTENSION])
    message.parts.append(ParseDict({"data": envelope, "mediaType": ENVELOPE_MEDIA_TYPE}, Part()))
    return SendMessageRequest(message=message)


def broadcast(scope: str) -> dict[str, Any]:
    return {
        "kind": "broadcast",
        "payload": {
            "scope": scope,
            "topic": "freeze",
            "message": "code freeze at 5pm",
            "urgency": "attention_needed",
        },
    }


async def hub_client(hub, sdk, token: str) -> Any:
    """The official SDK client for the hub's own endpoint (/a2a/)."""
    return await sdk("", token)


def answer_data(answer: Any) -> dict[str, Any]:
    return MessageToDict(answer)["parts"][1]["data"]


async def test_a_broadcast_reaches_twenty_agents_each_on_its_own(hub, sdk, settings):
    settings.HUB_FANOUT_MAX_ATTEMPTS = 2
    await db(
        policy_publish,
        document={"matrix": [{"caller": "lead", "target": "inbox-03", "action": "deny"}]},
        reason="test",
        actor_label="test",
    )
    tokens = {f"inbox-{i:02d}": (await inbox_agent(f"inbox-{i:02d}"))[1] for i in range(16)}
    online = {
        slug: await Inbox.open(hub.url, slug, token) for slug, token in list(tokens.items())[:14]
    }
    endpoints = [(await hub.endpoint_agent(f"svc-{i}"))[0] for i in range(3)]
    down = ScriptedAgent("svc-down", port=free_port())  # registered, never started
    await hub.register_card(down.card_json)
    _, lead = await hub.caller("lead")

    answer = await send(await hub_client(hub, sdk, lead), fan_out(broadcast("all")))

    data = answer_data(answer)
    by_agent = {d["agent"]: d for d in data["deliveries"]}
    assert len(by_agent) == 20  # everyone but the sender
    assert by_agent["inbox-03"]["decision"] == "reject"
    assert by_agent["inbox-03"]["reason"] == "denied_by_matrix"
    assert answer.parts[0].text == "sent to 19 of 20 agents; 1 refused by the policy"

    for slug, inbox in online.items():
        if slug == "inbox-03":
            continue
        frame = await inbox.next_of("delivery")
        assert (frame["kind"], frame["from"], frame["taskId"]) == ("broadcast", "lead", None)
        await inbox.send({"type": "ack", "deliveryId": frame["deliveryId"]})

    async def endpoints_received() -> bool:
        return all(agent.state.messages for agent in endpoints)

    await eventually(endpoints_received)

    async def settled() -> dict[str, str]:
        rows = await db(lambda: list(Delivery.objects.values_list("recipient__slug", "state")))
        states = dict(rows)
        return states if states["svc-down"] == "failed" else {}

    states = await eventually(settled, within=20)
    assert states["inbox-03"] == "rejected"
    assert {states[f"inbox-{i:02d}"] for i in (14, 15)} == {"pending"}  # offline: queued
    assert {
        states[s] for s in states if s not in ("inbox-03", "inbox-14", "inbox-15", "svc-down")
    } == {"acked"}
    failed = await db(lambda: Delivery.objects.get(recipient__slug="svc-down"))
    assert failed.attempts == 2 and "svc-down" in failed.last_error

    late = await Inbox.open(hub.url, "inbox-14", tokens["inbox-14"])
    assert (await late.next_of("delivery"))["kind"] == "broadcast"
    await late.close()
    for inbox in online.values():
        await inbox.close()
    [row] = await db(lambda: list(MessageRow.objects.all()))
    assert (row.kind, row.target_id, row.decision, len(row.recipients)) == (
        "broadcast",
        None,
        "deliver",
        20,
    )


async def test_a_knowledge_share_goes_to_the_agents_it_names(hub, sdk):
    _, ana = await inbox_agent("ana")
    await inbox_agent("bo")
    _, lead = await hub.caller("lead")
    inbox = await Inbox.open(hub.url, "ana", ana)
    share = {
        "kind": "knowledge_share",
        "payload": {
            "topic": "flaky test",
            "discovery": "test_login is flaky on CI",
            "relevantTo": ["ana", "bo", "ghost"],
        },
    }
    first = fan_out(share, "k-1")
    first.message.reference_task_ids.append("ci-run-812")
    answer = await send(await hub_client(hub, sdk, lead), first)
    data = answer_data(answer)
    assert [d["agent"] for d in data["deliveries"]] == ["ana", "bo"]
    assert data["unknown"] == ["ghost"]
    frame = await inbox.next_of("delivery")
    assert frame["envelope"]["payload"]["discovery"] == "test_login is flaky on CI"
    # The share reaches its recipients as it was sent, the tasks it refers to included.
    assert frame["message"]["referenceTaskIds"] == ["ci-run-812"]

    again = await send(await hub_client(hub, sdk, lead), first)  # a retry

    assert MessageToDict(again) == MessageToDict(answer)
    assert await db(Delivery.objects.count) == 2

    share["payload"]["discovery"] = "test_login is fixed"
    other = await send(await hub_client(hub, sdk, lead), fan_out(share, "k-1"))  # id reused

    assert other.message_id != answer.message_id
    assert [d["agent"] for d in answer_data(other)["deliveries"]] == ["ana", "bo"]
    frame = await inbox.next_of("delivery")
    assert frame["envelope"]["payload"]["discovery"] == "test_login is fixed"
    assert await db(Delivery.objects.count) == 4
    await inbox.close()


async def test_what_the_hub_cannot_fan_out_is_refused_clearly(hub, sdk):
    _, lead = await hub.caller("lead")
    client = await hub_client(hub, sdk, lead)
    plain = SendMessageRequest(
        message=Message(message_id="p-1", role=Role.ROLE_USER, parts=[Part(text="hi all")])
    )
    with pytest.raises(UnsupportedOperationError, match="address an agent"):
        await send(client, plain)
    with pytest.raises(InvalidParamsError, match="invalid broadcast scope"):
        await send(client, fan_out(broadcast("everyone"), "b-2"))
    nobody = {
        "kind": "knowledge_share",
        "payload": {"topic": "t", "discovery": "d", "relevantTo": ["ghost"]},
    }
    with pytest.raises(InvalidParamsError, match="nobody to share with"):
        await send(client, fan_out(nobody, "k-2"))
    assert await db(MessageRow.objects.count) == 0


async def test_a_broadcast_is_screened_by_the_content_rules_for_each_recipient(hub, sdk):
    # Cards are redacted for everyone; a pattern rejects for one recipient only.
    await db(
        policy_publish,
        document={
            "contentRules": [
                {"name": "cards", "detect": "card", "action": "redact"},
                {
                    "name": "no tickets for ops",
                    "detect": "pattern",
                    "pattern": "TICKET-[0-9]{4}",
                    "targets": ["ops"],
                    "action": "reject",
                },
            ]
        },
        reason="test",
        actor_label="test",
    )
    tokens = {slug: (await inbox_agent(slug))[1] for slug in ("dev", "ops")}
    inboxes = {slug: await Inbox.open(hub.url, slug, token) for slug, token in tokens.items()}
    _, lead = await hub.caller("lead")
    said = broadcast("all")
    said["payload"]["message"] = "refund 4111 1111 1111 1111 for TICKET-1234"

    answer = await send(await hub_client(hub, sdk, lead), fan_out(said))

    by_agent = {d["agent"]: d for d in answer_data(answer)["deliveries"]}
    assert (by_agent["ops"]["decision"], by_agent["ops"]["reason"]) == (
        "reject",
        "content_rejected",
    )
    frame = await inboxes["dev"].next_of("delivery")
    delivered = frame["message"]["parts"][0]["data"]["payload"]["message"]
    assert delivered == "refund [redacted: card] for TICKET-1234"
    [row] = await db(lambda: list(MessageRow.objects.all()))
    assert "4111" not in str(row.parts) and "4111" not in row.summary
    assert {f["rule"] for f in row.content_findings} == {"cards", "no tickets for ops"}
    for inbox in inboxes.values():
        await inbox.close()
