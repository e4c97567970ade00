"""Receipts: a caller that asks (`metadata.a2aHub.receipt: true`) gets, in its answer, a
signed receipt of its call's decision that verifies with the hub's JWKS alone; it can fetch
one later from GET /receipts/{messageId}; callers that do not ask get none."""

from __future__ import annotations

import json

import httpx
import pytest
from google.protobuf.json_format import MessageToDict

from a2a_core.asyncdb import db
from a2a_core.ledger.proofs import ProofError, check_receipt
from a2a_core.models import Message
from a2a_core.signing_keys import jwks
from tests.a2a_core.protocol.helpers import request, send

pytestmark = pytest.mark.live


def receipt_of(answer) -> str | None:
    return MessageToDict(answer.metadata).get("a2aHub", {}).get("receipt")


async def test_a_caller_that_asks_gets_a_receipt_that_verifies_with_the_jwks_alone(hub, sdk):
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client = await sdk("echo", token)

    plain = await send(client, request("echo no receipt", message_id="plain"))
    assert receipt_of(plain) is None

    asked = await send(
        client,
        request("echo a receipt", message_id="asked", metadata={"a2aHub": {"receipt": True}}),
    )
    token_text = receipt_of(asked)
    assert token_text
    payload = check_receipt(token_text, jwks())
    row = await db(lambda: Message.objects.get(message_id="asked"))
    entry = json.loads(payload["entry"])
    assert (entry["kind"], entry["type"], entry["id"]) == ("decision", "message", str(row.pk))
    assert entry["state"]["decision"] == "deliver"
    assert payload["checkpoint"]["size"] > payload["index"]

    flipped = token_text[:-5] + ("A" if token_text[-5] != "A" else "B") + token_text[-4:]
    with pytest.raises(ProofError):
        check_receipt(flipped, jwks())
    with pytest.raises(ProofError, match="no key"):
        check_receipt(token_text, {"keys": []})


async def test_a_receipt_is_fetched_later_by_its_sender_only(hub, sdk):
    await hub.endpoint_agent("echo")
    _, alpha = await hub.caller("alpha")
    _, bravo = await hub.caller("bravo")
    await send(await sdk("echo", alpha), request("echo later", message_id="later-1"))

    async with httpx.AsyncClient(base_url=hub.url) as http:
        mine = await http.get("/receipts/later-1", headers={"Authorization": f"Bearer {alpha}"})
        theirs = await http.get("/receipts/later-1", headers={"Authorization": f"Bearer {bravo}"})
        nobody = await http.get("/receipts/later-1")
        too_long = await http.get(
            "/receipts/" + "x" * 129, headers={"Authorization": f"Bearer {alpha}"}
        )
    assert mine.status_code == 200
    assert mine.json()["messageId"] == "later-1"
    payload = check_receipt(mine.json()["receipt"], jwks())
    assert json.loads(payload["entry"])["state"]["messageId"] == "later-1"
    assert theirs.status_code == 404
    assert "no receipt for message 'later-1' sent by bravo" in theirs.text
    assert nobody.status_code == 401
    assert too_long.status_code == 400
