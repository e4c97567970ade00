"""Cards the hub serves are signed (a detached JWS per A2A's AgentCardSignature) with a key
whose public half it publishes as a JWKS; the a2a-sdk's own verifier checks them."""

from __future__ import annotations

import json

import httpx
import pytest
from a2a.client import A2ACardResolver
from a2a.types.a2a_pb2 import AgentCard
from a2a.utils.signing import InvalidSignaturesError, create_signature_verifier
from google.protobuf.json_format import Parse
from jwt import PyJWK, PyJWKClient
from jwt.utils import base64url_decode

from tests.factories import make_card

V1 = {"A2A-Version": "1.0"}

pytestmark = pytest.mark.live


def _published_key(kid: str | None, jku: str | None) -> PyJWK:
    """The key a client finds where the signature says: the JWKS at `jku`, by `kid` (the
    hub serves from its own thread, so this blocking fetch may run on the test's loop)."""
    assert jku and kid
    return PyJWKClient(jku).get_signing_key(kid)


VERIFY = create_signature_verifier(_published_key, ["ES256"])


def _flip_a_byte_of_the_name(body: bytes) -> bytes:
    at = body.index(b'"name":"') + len(b'"name":"')
    return body[:at] + bytes([body[at] ^ 0x01]) + body[at + 1 :]


@pytest.mark.parametrize("path", ["/a2a/duc", ""])
async def test_a_served_card_verifies_with_the_published_jwks_and_a_flipped_byte_does_not(
    hub, path
):
    await hub.register_card(make_card("duc"))
    async with httpx.AsyncClient(timeout=30) as http:
        card = await A2ACardResolver(http, f"{hub.url}{path}").get_agent_card(
            http_kwargs={"headers": V1}, signature_verifier=VERIFY
        )
        body = (await http.get(f"{hub.url}{path}/.well-known/agent-card.json", headers=V1)).content
        jwks = (await http.get(f"{hub.url}/.well-known/jwks.json")).json()

    assert len(card.signatures) == 1
    header = json.loads(base64url_decode(card.signatures[0].protected))
    assert header["jku"] == f"{hub.url}/.well-known/jwks.json"
    assert header["alg"] == "ES256"
    assert [key["kid"] for key in jwks["keys"]] == [header["kid"]]

    tampered = Parse(_flip_a_byte_of_the_name(body), AgentCard())
    assert tampered.name != card.name
    with pytest.raises(InvalidSignaturesError):
        VERIFY(tampered)


@pytest.mark.parametrize("agent_version", ["0.3", "1.0"])
async def test_a_client_that_sends_no_a2a_version_verifies_the_card_too(hub, agent_version):
    """Without the header the hub serves the card in the agent's own version: for an agent
    serving 0.3 clients the 0.3 view, which the 1.x SDK reads back to the 1.0 card the
    signature covers; else the 1.0 card itself."""
    interface = {"url": "http://127.0.0.1:9/", "protocolBinding": "JSONRPC"}
    await hub.register_card(
        make_card("duc", interfaces=[{**interface, "protocolVersion": agent_version}])
    )
    async with httpx.AsyncClient(timeout=30) as http:
        served = (await http.get(f"{hub.url}/a2a/duc/.well-known/agent-card.json")).json()
        card = await A2ACardResolver(http, f"{hub.url}/a2a/duc").get_agent_card(
            signature_verifier=VERIFY
        )
    assert served.get("protocolVersion") == ("0.3" if agent_version == "0.3" else None)
    assert served["signatures"]
    assert card.name == "duc"
