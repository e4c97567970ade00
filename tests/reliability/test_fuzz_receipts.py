"""Junk for the tamper-evident record's entry points: the `a2aHub.receipt` request metadata
key, GET /receipts/{messageId}, and the offline checks (`a2a audit verify --export`,
`a2a audit verify-receipt`). No 5xx, no traceback, a receipt only for `true`, and the record
intact afterwards. Seeded, so a failure reproduces."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from django.core.management.base import CommandError

from a2a_core.asyncdb import db
from a2a_core.ledger.proofs import check_receipt
from a2a_core.signing_keys import jwks
from tests.a2a_core.cli.helpers import a2a
from tests.reliability.junk import OVERSIZED, junk_value, surrogate

pytestmark = pytest.mark.live

SEED = 20261129


def _send_body(i: int, receipt: Any, where: str) -> bytes:
    hub = {"receipt": receipt}
    message: dict[str, Any] = {
        "messageId": f"fuzz-receipt-{i}",
        "role": "ROLE_USER",
        "parts": [{"text": f"echo {i}"}],
    }
    params: dict[str, Any] = {"message": message}
    if where == "message":
        message["metadata"] = {"a2aHub": hub}
    elif where == "request":
        params["metadata"] = {"a2aHub": hub}
    else:  # the hub's key itself junk
        params["metadata"] = {"a2aHub": receipt}
    return json.dumps(
        {"jsonrpc": "2.0", "id": i, "method": "SendMessage", "params": params}
    ).encode()


async def test_junk_receipt_metadata_gets_no_5xx_and_a_receipt_only_for_true(hub):
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    rng = random.Random(SEED)
    receipts = 0
    headers = {
        "Authorization": f"Bearer {token}",
        "A2A-Version": "1.0",
        "Content-Type": "application/json",
    }
    async with httpx.AsyncClient(base_url=hub.url, headers=headers, timeout=30) as http:
        for i in range(120):
            value = True if i % 10 == 0 else junk_value(rng)
            where = rng.choice(["message", "request", "hub"])
            response = await http.post("/a2a/echo/", content=_send_body(i, value, where))
            assert response.status_code < 500, response.text[:500]
            result = response.json().get("result")
            if not result:
                continue
            metadata = result.get("task", result.get("message", {})).get("metadata", {})
            receipt = metadata.get("a2aHub", {}).get("receipt")
            if value is True and where != "hub":
                assert receipt, response.text[:500]
                check_receipt(receipt, jwks())
                receipts += 1
            else:
                assert receipt is None
        oversized = await http.post(
            "/a2a/echo/", content=_send_body(999, "x" * OVERSIZED, "request")
        )
        assert oversized.status_code == 413 or oversized.status_code < 500
    assert receipts >= 8
    out = await db(a2a, "audit", "verify", "--quiet")
    assert out.startswith("intact: ")


def _junk_id(rng: random.Random) -> str:
    choice = rng.randrange(8)
    if choice == 0:
        return "x" * rng.choice([129, 5000, 70_000])
    if choice == 1:
        return quote(surrogate(rng).encode("utf-8", "surrogatepass"))
    if choice == 2:
        return rng.choice(["..%2F..%2Fadmin", "%00", "%0d%0aSet-Cookie:x", "a/b/c", "%ZZ", "%"])
    if choice == 3:
        return quote(str(junk_value(rng))[:300].encode("utf-8", "surrogatepass"), safe="")
    if choice == 4:
        return "fuzz-receipt-0"
    return quote("".join(chr(rng.randrange(0x20, 0x2FFF)) for _ in range(rng.randrange(1, 60))))


async def test_junk_receipt_requests_get_no_5xx(hub):
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    rng = random.Random(SEED + 1)
    seen: set[int] = set()
    async with httpx.AsyncClient(base_url=hub.url, timeout=30) as http:
        for _ in range(200):
            auth = rng.choice(
                [f"Bearer {token}", "Bearer junk", "", "Basic eA==", "Bearer " + "x" * 9000]
            )
            headers = {"Authorization": auth} if auth else {}
            try:
                response = await http.get(f"/receipts/{_junk_id(rng)}", headers=headers)
            except httpx.InvalidURL:
                continue
            assert response.status_code < 500, response.text[:500]
            seen.add(response.status_code)
    assert {400, 401, 404} <= seen


def _junk_export(rng: random.Random) -> bytes:
    choice = rng.randrange(7)
    if choice == 0:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 500)))
    if choice == 1:
        return json.dumps(junk_value(rng)).encode() + b"\n"
    if choice == 2:
        line = {"type": "entry", "index": junk_value(rng), "body": junk_value(rng)}
        line |= {"leafHash": junk_value(rng), "chainHash": "", "kind": 1, "object": None}
        return json.dumps(line).encode() + b"\n"
    if choice == 3:
        line = {"type": "checkpoint", "size": junk_value(rng), "root": "00", "jws": junk_value(rng)}
        return json.dumps(line).encode() + b"\n"
    if choice == 4:
        return b'{"type": "entry"' + b" " * 1000 + b"\n"
    if choice == 5:
        return b""
    return ("\n".join(json.dumps(junk_value(rng)) for _ in range(5))).encode()


def test_junk_exports_receipts_and_key_sets_are_refused_with_a_line_not_a_traceback(
    tmp_path: Path,
):
    rng = random.Random(SEED + 2)
    keys = tmp_path / "jwks.json"
    keys.write_text(json.dumps({"keys": [{"kty": "EC", "kid": "x", "crv": "P-256"}]}))
    junk = tmp_path / "junk"
    outcomes: set[int] = set()
    for i in range(150):
        junk.write_bytes(_junk_export(rng))
        if i % 3 == 0:
            args = ["audit", "verify", "--export", str(junk), "--jwks", str(keys)]
        elif i % 3 == 1:
            args = ["audit", "verify-receipt", str(junk), "--jwks", str(keys)]
        else:
            args = ["audit", "verify-receipt", str(keys), "--jwks", str(junk)]
        with pytest.raises(CommandError) as refused:
            a2a(*args)
        assert refused.value.returncode in (1, 2)
        assert str(refused.value)
        outcomes.add(refused.value.returncode)
    assert outcomes == {1, 2}
