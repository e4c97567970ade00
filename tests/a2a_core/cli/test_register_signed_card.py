"""`a2a register` with a signed card: it is registered only when a signature verifies with a
key the operator trusts, from a JWKS served for real on 127.0.0.1. A card changed after it was
signed, one whose keys cannot be fetched, and one signed by a key the pinned signers do not
hold (whatever its `jku` says) are refused, each saying why."""

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


@pytest.fixture
def pinned(signer, settings):
    """The operator trusts `signer`'s keys, and only those, for the cards agents register."""
    settings.HUB_CARD_SIGNER_JWKS = [signer.jwks_url]
    return signer


def signed_card(signer: IdentityProvider, name: str, *, kid: str | None = None) -> dict:
    key = signer.keys[0]
    card = ParseDict(make_card(name), AgentCard())
    sign = create_agent_card_signer(
        key.private,  # type: ignore[arg-type]
        {"kid": kid or key.kid, "alg": "ES256", "jku": signer.jwks_url, "typ": "JOSE"},
    )
    return MessageToDict(sign(card))


def register(tmp_path, card: dict) -> str:
    path = tmp_path / "card.json"
    path.write_text(json.dumps(card))
    return a2a("register", str(path))


def refused(tmp_path, card: dict) -> str:
    with pytest.raises(CommandError) as error:
        register(tmp_path, card)
    assert not Agent.objects.filter(slug=card["name"]).exists()
    return str(error.value)


def test_a_card_signed_by_the_pinned_signer_registers_saying_which_key_verified_it(
    pinned, tmp_path
):
    out = register(tmp_path, signed_card(pinned, "notary"))
    assert (
        f"card signature: its signature verifies (kid '{pinned.keys[0].kid}' "
        f"from {pinned.jwks_url})"
    ) in out
    assert Agent.objects.filter(slug="notary").exists()


def test_a_signed_card_with_a_tampered_field_is_refused(pinned, tmp_path):
    card = signed_card(pinned, "notary")
    card["description"] = "notary does something else entirely"
    message = refused(tmp_path, card)
    assert "the card's signature does not verify" in message
    assert "the card was changed after it was signed" in message


def test_a_tampered_card_whose_jku_is_unreachable_is_refused(signer, tmp_path):
    card = signed_card(signer, "notary")
    card["description"] = "notary now forwards everything to me"
    signer.stop()  # its jku no longer answers
    message = refused(tmp_path, card)
    assert message == (
        "the card's signature cannot be verified (none of its 1 signature(s)): a signed card "
        "is registered only when a trusted key verifies it\n"
        "  - signatures[0]: no card signer is trusted: HUB_CARD_SIGNER_JWKS is empty, and a "
        "signature's own jku is followed only with HUB_CARD_SIGNER_FOLLOW_JKU"
    )


def test_a_tampered_card_is_refused_when_the_pinned_signers_jwks_is_unreachable(pinned, tmp_path):
    card = signed_card(pinned, "notary")
    card["description"] = "notary now forwards everything to me"
    pinned.stop()
    message = refused(tmp_path, card)
    assert message.startswith("the card's signature cannot be verified")
    assert f"the JWKS at {pinned.jwks_url} is unreachable" in message


def test_with_jku_followed_only_an_https_jku_is_fetched(signer, settings, tmp_path):
    settings.HUB_CARD_SIGNER_FOLLOW_JKU = True
    message = refused(tmp_path, signed_card(signer, "notary"))
    assert (
        f"signatures[0]: its jku '{signer.jwks_url}' is not an https URL, the only kind followed"
    ) in message
    assert signer.fetches == 0


def test_a_card_signed_by_another_key_is_refused_when_signers_are_pinned(pinned, tmp_path):
    """The attacker signs with their own key and points `jku` at their own JWKS, which
    serves it: with signers pinned, that JWKS is never fetched."""
    attacker = IdentityProvider()
    try:
        message = refused(tmp_path, signed_card(attacker, "notary"))
        assert attacker.fetches == 0
    finally:
        attacker.stop()
    assert message == (
        "the card's signature cannot be verified (none of its 1 signature(s)): a signed card "
        "is registered only when a trusted key verifies it\n"
        "  - signatures[0]: no pinned signer (HUB_CARD_SIGNER_JWKS) holds its key: the JWKS "
        f"at {pinned.jwks_url} has no key with kid '{attacker.keys[0].kid}'"
    )


def test_a_card_signed_by_another_key_under_the_pinned_kid_does_not_verify(pinned, tmp_path):
    attacker = IdentityProvider()
    try:
        card = signed_card(attacker, "notary", kid=pinned.keys[0].kid)
    finally:
        attacker.stop()
    message = refused(tmp_path, card)
    assert "the card's signature does not verify" in message
    assert f"it does not verify with kid '{pinned.keys[0].kid}' from {pinned.jwks_url}" in message


def test_an_unverifiable_card_registers_only_when_the_operator_allows_it(
    pinned, settings, tmp_path
):
    card = signed_card(pinned, "notary")
    pinned.stop()
    settings.HUB_CARD_ALLOW_UNVERIFIED = True
    out = register(tmp_path, card)
    assert (
        "card signature: its 1 signature(s) were not checked (HUB_CARD_ALLOW_UNVERIFIED): "
        "no pinned signer (HUB_CARD_SIGNER_JWKS) holds its key: "
        f"the JWKS at {pinned.jwks_url} is unreachable"
    ) in out
    assert Agent.objects.filter(slug="notary").exists()


def test_a_tampered_card_is_refused_even_when_unverified_cards_are_allowed(
    pinned, settings, tmp_path
):
    settings.HUB_CARD_ALLOW_UNVERIFIED = True
    card = signed_card(pinned, "notary")
    card["description"] = "notary does something else entirely"
    assert "the card was changed after it was signed" in refused(tmp_path, card)


def test_a_card_signed_with_a_key_its_signer_does_not_publish_is_refused(pinned, tmp_path):
    card = signed_card(pinned, "notary")
    pinned.rotate()
    with pytest.raises(CommandError, match=r"has no key with kid"):
        register(tmp_path, card)


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


def test_a_signed_0_3_card_is_checked_over_its_0_3_form(pinned, tmp_path):
    card = signed_v03_card(pinned, "elder")
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


def test_the_admin_shows_a_card_but_cannot_add_one_or_edit_it(pinned, tmp_path, admin_client):
    """Registration is the one way a card comes in, so every card gets its check."""
    register(tmp_path, signed_card(pinned, "notary"))
    agent = Agent.objects.get(slug="notary")

    assert admin_client.get("/admin/a2a_core/agent/add/").status_code == 403
    page = admin_client.get(f"/admin/a2a_core/agent/{agent.pk}/change/").content.decode()
    assert "notary does things" in page
    for field in ("card", "name", "description", "card_version", "endpoint_url"):
        assert f'name="{field}"' not in page
    version = agent.card_versions.get()
    page = admin_client.get(f"/admin/a2a_core/agentcardversion/{version.pk}/change/")
    assert page.status_code == 200 and 'name="card"' not in page.content.decode()
    assert admin_client.get("/admin/a2a_core/agentcardversion/add/").status_code == 403
