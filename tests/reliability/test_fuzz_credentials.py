"""Junk at the credential entry points: seeded junk for every field of `set` (service and
dashboard form) is refused with the fields named, never a 500, never the secret echoed; and a
token endpoint that answers HTML, megabytes, not JSON, not a token, an error, or nothing in
time gives each call the agent-auth error within a bounded time."""

from __future__ import annotations

import random
from typing import Any
from urllib.parse import urlencode

import pytest
from a2a.client import A2AClientError
from django.conf import settings
from django.test import Client

from a2a_core.asyncdb import db
from a2a_core.delivery import oauth2 as oauth2_module
from a2a_core.errors import ValidationFailed
from a2a_core.federation import peer_chain
from a2a_core.models import Agent
from a2a_core.services.agents import agent_register
from a2a_core.services.credentials import agent_credentials_set
from a2a_core.services.users import user_create
from tests.a2a_core.credentials.helpers import outcome, set_credential
from tests.auth import BEARER, TokenEndpoint, api_key, guarded_agent, oauth2
from tests.reliability.junk import junk_value

SEED = 20261129
SECRET = "fuzz-secret-2c8e5a71"


def _junk_text(rng: random.Random) -> Any:
    value = junk_value(rng)
    return value if rng.random() < 0.7 else str(value) * rng.choice([1, 50, 5000])


@pytest.mark.django_db
def test_junk_credential_fields_are_refused_with_the_field_named():
    scripted = guarded_agent(
        "vault",
        {"b": BEARER, "k": api_key("query", "key"), "o": oauth2("https://id.example/t")},
        lambda given: True,
        "bearer",
    )
    agent = agent_register(card=scripted.card_json).agent
    rng = random.Random(SEED)
    accepted = refused = 0
    for _ in range(150):
        fields: dict[str, Any] = {
            "scheme": rng.choice(["b", "k", "o", None, _junk_text(rng)]),
            "secret": rng.choice([SECRET, "", _junk_text(rng), SECRET + "\r\nX: y"]),
        }
        for name in ("client_id", "token_url"):
            if rng.random() < 0.4:
                fields[name] = rng.choice(["hub", "https://ok.example/t", _junk_text(rng)])
        if rng.random() < 0.3:
            fields["scopes"] = [_junk_text(rng) for _ in range(rng.choice([1, 3, 80]))]
        # What the CLI and the form can give: text, a list of scopes, no scheme at all.
        fields = {
            k: v if k == "scopes" or isinstance(v, str) or v is None else str(v)
            for k, v in fields.items()
        }
        if "scopes" in fields:
            fields["scopes"] = [str(scope) for scope in fields["scopes"]]
        try:
            agent_credentials_set(agent=agent, actor_label="fuzz", **fields)
        except ValidationFailed as exc:
            refused += 1
            said = str(exc)
            assert said and len(said) < 4000
            if fields["secret"] and len(fields["secret"]) > 6:
                assert fields["secret"] not in said
        else:
            accepted += 1
    assert accepted and refused


@pytest.mark.django_db
def test_junk_dashboard_credential_forms_get_no_500():
    scripted = guarded_agent("vault", {"b": BEARER}, lambda given: True, "bearer")
    agent_register(card=scripted.card_json)
    admin = user_create(username="root", password="a-long-test-password-2026", role="admin")
    client = Client()
    client.force_login(admin)
    rng = random.Random(SEED)
    for _ in range(40):
        form = {
            name: str(_junk_text(rng))
            for name in ("scheme", "secret", "client_id", "token_url", "scopes")
            if rng.random() < 0.8
        }
        # Sent as bytes: lone surrogates become bytes no UTF-8 decoder takes.
        body = urlencode({k: v.encode("utf-8", "surrogatepass") for k, v in form.items()})
        answer = client.post(
            "/agents/vault/credentials/", body, content_type="application/x-www-form-urlencoded"
        )
        if len(body) > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
            assert answer.status_code == 400  # Django's own refusal, before the view
            continue
        assert answer.status_code == 200
        secret = form.get("secret", "")
        if len(secret) > 8 and b"is set" not in answer.content:
            assert secret.encode("utf-8", "surrogatepass") not in answer.content
    answer = client.post("/agents/vault/credentials/", {"secret": "x" * 100_000})
    assert answer.status_code == 200
    assert b"secret: is longer than 8192 characters" in answer.content


BEHAVIOURS = {
    "html": "answered HTTP 200 with something that is not JSON (content type text/html)",
    "huge": "the token endpoint's answer is larger than 64 KB",
    "notjson": "answered HTTP 200 with something that is not JSON (content type text/plain)",
    "nottoken": "the token endpoint's answer is not a token response (wrong: access_token)",
    "down": "answered HTTP 500 with something that is not JSON",
    "slow": "the token endpoint did not answer within 1 s",
    "refused": "the token endpoint refused the hub's client: HTTP 401 (invalid_client)",
}


@pytest.mark.live
async def test_a_misbehaving_token_endpoint_gives_the_agent_auth_error(hub, sdk, monkeypatch):
    monkeypatch.setattr(oauth2_module, "FETCH_SECONDS", 1.0)
    _, token = await hub.caller("alpha")
    endpoints = []
    try:
        for i, (mode, said) in enumerate(BEHAVIOURS.items()):
            endpoint = TokenEndpoint("hub-client", SECRET).start()
            endpoints.append(endpoint)
            endpoint.mode = "ok" if mode == "refused" else mode
            slug = f"payroll{i}"
            scripted = guarded_agent(slug, {"o": oauth2(endpoint.url)}, endpoint.valid, "bearer")
            agent, _ = await hub.register_card(scripted.card_json)
            scripted.start(hub_url=hub.url)
            hub.agents.append(scripted)
            await set_credential(
                agent, secret="wrong" if mode == "refused" else SECRET, client_id="hub-client"
            )
            client = await sdk(slug, token)
            with pytest.raises(A2AClientError) as raised:
                await outcome(client, "echo hi")
            error = str(raised.value)
            assert f"{slug} cannot be called: no OAuth2 token, " in error, mode
            assert said in error, (mode, error)
            assert SECRET not in error
            stream = await sdk(slug, token, streaming=True)
            assert (await outcome(stream, "echo hi"))[0] == "TASK_STATE_FAILED"
            failing = await db(lambda slug=slug: Agent.objects.get(slug=slug))
            assert said in failing.auth_failure
    finally:
        for endpoint in endpoints:
            endpoint.stop()


def test_junk_chains_from_a_peer_hub_are_ignored(settings):
    settings.HUB_ID = "hub-a"
    rng = random.Random(SEED)
    for _ in range(3000):
        value = str(_junk_text(rng))
        if rng.random() < 0.3:
            value = ",".join(rng.choice(["hub-b/x", "hub-a/y", value[:20]]) for _ in range(5))
        chain = peer_chain(value)
        assert chain == () or all(entry.count("/") <= 1 and len(entry) < 130 for entry in chain)
    assert peer_chain("hub-b/planner,hub-a/echo") == ("hub-b/planner", "echo")
    assert peer_chain(",".join(["hub-b/x"] * 33)) == ()
    assert peer_chain("hub-b/x\r\nX-Injected: y") == ()
    assert peer_chain("hub-b/../etc,hub-b/x") == ()
    settings.HUB_ID = ""
    assert peer_chain("hub-b/planner") == ()
