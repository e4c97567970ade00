"""`a2a register` with a signed card: its signature is checked against the signer's JWKS
(served for real on 127.0.0.1), and a card changed after it was signed is refused."""

from __future__ import annotations

import json

import pytest
from a2a.types.a2a_pb2 import AgentCard
from a2a.utils.signing import create_agent_card_signer
from django.core.management.base import CommandError
from google.protobuf.json_format import MessageToDict, ParseDict
from jwt import api_jws

from a2a_core.models import Agent
from tests.a2a_core.cli.helpers import a2a
from tests.factories import make_card
from tests.identity import IdentityProvider
from tests.peers import PeerProcess, peer_python

pytestmark = pytest.mark.django_db


@pytest.fixture
def signer():
    provider = IdentityProvider()
    yield provider
    provider.stop()


def signed_card(signer: IdentityProvider, name: str) -> dict:
    key = signer.keys[0]
    card = ParseDict(make_card(name), AgentCard())
    sign = create_agent_card_signer(
        key.private,  # type: ignore[arg-type]
        {"kid": key.kid, "alg": "ES256", "jku": signer.jwks_url, "typ": "JOSE"},
    )
    return MessageToDict(sign(card))


def test_a_signed_card_registers_saying_which_key_verified_it(signer, tmp_path):
    path = tmp_path / "card.json"
    path.write_text(json.dumps(signed_card(signer, "notary")))
    out = a2a("register", str(path))
    assert f"card signature: its signature verifies (kid '{signer.keys[0].kid}'" in out
    assert Agent.objects.filter(slug="notary").exists()


def test_a_signed_card_with_a_tampered_field_is_refused(signer, tmp_path):
    card = signed_card(signer, "notary")
    card["description"] = "notary does something else entirely"
    path = tmp_path / "card.json"
    path.write_text(json.dumps(card))
    with pytest.raises(CommandError) as refused:
        a2a("register", str(path))
    message = str(refused.value)
    assert "the card's signature does not verify" in message
    assert "the card was changed after it was signed" in message
    assert not Agent.objects.filter(slug="notary").exists()


def test_a_signed_card_whose_keys_cannot_be_fetched_registers_saying_it_was_not_checked(
    signer, tmp_path
):
    card = signed_card(signer, "notary")
    signer.stop()
    path = tmp_path / "card.json"
    path.write_text(json.dumps(card))
    out = a2a("register", str(path))
    assert "card signature: its 1 signature(s) were not checked" in out
    assert f"the JWKS at {signer.jwks_url} is unreachable" in out


def test_a_card_signed_with_a_key_its_signer_does_not_publish_is_refused(signer, tmp_path):
    card = signed_card(signer, "notary")
    signer.rotate()
    path = tmp_path / "card.json"
    path.write_text(json.dumps(card))
    with pytest.raises(CommandError, match=r"has no key with kid"):
        a2a("register", str(path))


SDK03 = ["a2a-sdk[http-server]==0.3.26", "httpx", "uvicorn"]


def signed_v03_card(signer: IdentityProvider, name: str) -> dict:
    """A 0.3 card signed over the bytes the a2a-sdk 0.3 itself canonicalizes it to."""
    card = {
        "name": name,
        "description": f"{name} does things",
        "version": "1.0.0",
        "url": "http://127.0.0.1:9/",
        "protocolVersion": "0.3.0",
        "capabilities": {"streaming": True},
        "defaultInputModes": ["text"],
        "defaultOutputModes": ["text"],
        "skills": [{"id": "echo", "name": "Echo", "description": "echoes", "tags": ["test"]}],
    }
    canonical = PeerProcess(
        peer_python("sdk03", SDK03), "sdk03_canonical_card.py", json.dumps(card)
    )
    payload = canonical.run().strip().encode()
    key = signer.keys[0]
    protected, _, signature = api_jws.encode(
        payload,
        key.private,  # type: ignore[arg-type]
        algorithm="ES256",
        headers={"kid": key.kid, "jku": signer.jwks_url, "typ": "JOSE"},
    ).split(".")
    return {**card, "signatures": [{"protected": protected, "signature": signature}]}


def test_a_signed_0_3_card_is_checked_over_its_0_3_form(signer, tmp_path):
    card = signed_v03_card(signer, "elder")
    path = tmp_path / "card.json"
    path.write_text(json.dumps(card))
    out = a2a("register", str(path), "--slug", "elder")
    assert "converted an A2A 0.3 card" in out
    assert "card signature: its signature verifies" in out

    card["description"] = "elder was edited"
    card["version"] = "1.0.1"
    path.write_text(json.dumps(card))
    with pytest.raises(CommandError, match="the card was changed after it was signed"):
        a2a("register", str(path), "--slug", "elder")
