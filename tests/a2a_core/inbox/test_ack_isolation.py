"""One agent's junk acknowledgement never costs another's: refused at the edge with a precise
error, and a group commit that fails anyway fails only the member that broke it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

import pytest

from a2a_core.asyncdb import db
from a2a_core.models import Delivery
from a2a_core.services.inbox import inbox_acks
from a2a_core.storage.batching import Batcher
from tests.a2a_core.inbox.helpers import Inbox
from tests.a2a_core.inbox.test_inbox_agents import inbox_agent
from tests.a2a_core.protocol.helpers import request, send

pytestmark = pytest.mark.live

TOO_BIG = 2**63


async def delivered(hub, sdk, slug: str, caller_token: str) -> tuple[Inbox, dict]:
    """`slug`'s inbox, connected, holding one delivery it has not acknowledged."""
    _, token = await inbox_agent(slug)
    client = await sdk(slug, caller_token)
    inbox = await Inbox.open(hub.url, slug, token)
    await send(client, request(f"job for {slug}", return_immediately=True))
    return inbox, await inbox.next_of("delivery")


async def answers(inbox: Inbox, refs: set[str]) -> dict[str, dict]:
    """The hub's answers to the frames with these refs, by ref."""
    found: dict[str, dict] = {}
    while set(found) != refs:
        frame = await inbox.next()
        if frame["type"] in ("ok", "error"):
            found[frame["ref"]] = frame
    return found


async def acked(*delivery_ids: int) -> bool:
    return await db(
        lambda: (
            set(Delivery.objects.filter(pk__in=delivery_ids).values_list("state", flat=True))
            == {"acked"}
        )
    )


async def test_an_out_of_range_delivery_id_is_refused_and_the_real_acks_beside_it_commit(hub, sdk):
    _, alpha = await hub.caller("alpha")
    duc, duc_delivery = await delivered(hub, sdk, "duc", alpha)
    eve, eve_delivery = await delivered(hub, sdk, "eve", alpha)

    # Sent back to back without waiting, so the consumers read them together.
    await duc.ws.send(json.dumps({"type": "ack", "ref": "junk", "deliveryId": TOO_BIG}))
    await duc.ws.send(
        json.dumps({"type": "ack", "ref": "real", "deliveryId": duc_delivery["deliveryId"]})
    )
    await eve.ws.send(
        json.dumps({"type": "ack", "ref": "real", "deliveryIds": [eve_delivery["deliveryId"]]})
    )
    await eve.ws.send(
        json.dumps({"type": "ack", "ref": "junk", "deliveryIds": [eve_delivery["deliveryId"], -1]})
    )

    duc_answers = await answers(duc, {"junk", "real"})
    eve_answers = await answers(eve, {"junk", "real"})
    assert duc_answers["junk"]["code"] == "invalid"
    assert duc_answers["junk"]["errors"] == [
        {"field": "deliveryId", "message": f"Input should be less than or equal to {TOO_BIG - 1}"}
    ]
    assert eve_answers["junk"]["errors"] == [
        {"field": "deliveryIds.1", "message": "Input should be greater than or equal to 1"}
    ]
    assert duc_answers["real"] == {"type": "ok", "ref": "real", "acknowledged": 1}
    assert eve_answers["real"] == {"type": "ok", "ref": "real", "acknowledged": 1}
    assert await acked(duc_delivery["deliveryId"], eve_delivery["deliveryId"])


async def test_a_group_commit_that_one_member_breaks_commits_the_others(hub, sdk):
    """The websocket refuses the junk before it is batched, so this drives a Batcher with the
    hub's real acknowledgement writes: the members are submitted in one turn of the loop and
    share one batch, the way concurrent connections' acks do."""
    _, alpha = await hub.caller("alpha")
    duc_agent, duc_token = await inbox_agent("duc")
    eve_agent, _ = await inbox_agent("eve")
    for slug in ("duc", "eve"):
        await send(await sdk(slug, alpha), request(f"job for {slug}", return_immediately=True))
    duc_delivery, eve_delivery = await db(
        lambda: [Delivery.objects.get(recipient__slug=slug).pk for slug in ("duc", "eve")]
    )

    batches: list[int] = []

    def commit(acks: Sequence[tuple[int, Sequence[int]]]) -> list[int | Exception]:
        batches.append(len(acks))
        return inbox_acks(acks)

    batcher: Batcher[tuple[int, Sequence[int]], int] = Batcher(commit)
    results = await asyncio.gather(
        batcher.submit((duc_agent.pk, [duc_delivery])),
        batcher.submit((eve_agent.pk, [TOO_BIG])),
        batcher.submit((eve_agent.pk, [eve_delivery])),
        return_exceptions=True,
    )

    assert batches[0] == 3, "the three acks were not in one batch"
    assert results[0] == 1 and results[2] == 1
    # SQLite cannot bind it (OverflowError breaks the shared query); PostgreSQL finds nothing.
    assert isinstance(results[1], Exception)
    assert await acked(duc_delivery, eve_delivery)

    # The agent whose ack committed is not sent the delivery again on its next connection.
    inbox = await Inbox.open(hub.url, "duc", duc_token)
    assert inbox.hello["waiting"] == 0
