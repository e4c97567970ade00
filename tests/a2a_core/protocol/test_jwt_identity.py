"""Agents that sign in with their own identity provider's JWT (a real JWKS server on
127.0.0.1, keys made in the test) instead of a hub token, beside hub tokens."""

from __future__ import annotations

import httpx
import pytest

from a2a_core.asyncdb import db
from a2a_core.models import Agent, Message
from a2a_core.services.identity import issuer_trust
from tests.a2a_core.protocol.helpers import request, send
from tests.a2a_core.protocol.test_bad_input import V1, error_info
from tests.identity import IdentityProvider, Key
from tests.servers import free_port

pytestmark = pytest.mark.live

AUDIENCE = "https://hub.example/a2a"


@pytest.fixture
def provider():
    running = IdentityProvider()
    yield running
    running.stop()


@pytest.fixture
async def robot(hub, provider):
    """The agent `robot`, whose provider's client `robot-client` signs in as it."""
    await hub.endpoint_agent("echo")
    agent, hub_token = await hub.caller("robot")
    await db(
        issuer_trust,
        issuer=provider.issuer,
        jwks_url=provider.jwks_url,
        audience=AUDIENCE,
        agent=agent,
        value="robot-client",
    )
    return hub_token


async def refusal(hub, token: str) -> tuple[int, str, dict[str, str]]:
    """(status, message, ErrorInfo metadata) of a REST call to echo with `token`."""
    async with httpx.AsyncClient(base_url=hub.url, timeout=30) as http:
        response = await http.get(
            "/a2a/echo/rest/tasks/none", headers={**V1, "Authorization": f"Bearer {token}"}
        )
    body = response.json()
    return response.status_code, body["error"]["message"], error_info(body).get("metadata", {})


async def sent_by(slug: str) -> int:
    return await db(lambda: Message.objects.filter(sender__slug=slug, kind="request").count())


async def test_a_valid_token_signs_in_as_its_agent_beside_its_hub_token(hub, sdk, robot, provider):
    token = provider.token("robot-client", audience=AUDIENCE)
    answer = await send(await sdk("echo", token), request("hi"))
    assert answer.artifacts[0].parts[0].text == "echo: hi"
    assert await sent_by("robot") == 1

    answer = await send(await sdk("echo", robot), request("again"))
    assert answer.artifacts[0].parts[0].text == "echo: again"
    assert await sent_by("robot") == 2


async def test_discovery_accepts_the_token_too(hub, robot, provider):
    token = provider.token("robot-client", audience=AUDIENCE)
    async with httpx.AsyncClient(base_url=hub.url, timeout=30) as http:
        response = await http.get("/discover", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200
    assert "echo" in [agent["slug"] for agent in response.json()["agents"]]


async def test_refused_tokens_say_why(hub, robot, provider):
    forged = Key.new()
    forged.kid = provider.keys[0].kid
    cases = {
        "expired": provider.token("robot-client", audience=AUDIENCE, lifetime=-60),
        "bad_signature": provider.token("robot-client", audience=AUDIENCE, key=forged),
        "unknown_key": provider.token("robot-client", audience=AUDIENCE, key=Key.new()),
        "wrong_audience": provider.token("robot-client", audience="https://elsewhere/"),
        "unknown_subject": provider.token("stranger", audience=AUDIENCE),
        "untrusted_issuer": provider.token(
            "robot-client", audience=AUDIENCE, iss="https://idp.evil/"
        ),
    }
    seen = {}
    for reason, token in cases.items():
        status, message, metadata = await refusal(hub, token)
        assert status == 401, (reason, message)
        assert metadata == {"jwt": reason}, message
        seen[reason] = message
    assert seen["expired"].startswith("the token expired at ")
    assert "signature does not verify" in seen["bad_signature"]
    assert "does not publish" in seen["unknown_key"]
    assert f"not {AUDIENCE!r}" in seen["wrong_audience"]
    assert "subject 'stranger' maps to no agent" in seen["unknown_subject"]
    assert "'https://idp.evil/' is not trusted" in seen["untrusted_issuer"]
    assert await sent_by("robot") == 0


async def test_a_key_rotation_at_the_jwks_is_picked_up(hub, sdk, robot, provider, settings):
    # The hub refetches for an unknown kid at most every HUB_JWKS_REFRESH_COOLDOWN seconds;
    # the rotation here follows the first fetch at once.
    settings.HUB_JWKS_REFRESH_COOLDOWN = 0
    before = provider.token("robot-client", audience=AUDIENCE)
    await send(await sdk("echo", before), request("one"))
    assert provider.fetches == 1
    await send(await sdk("echo", provider.token("robot-client", audience=AUDIENCE)), request("2"))
    assert provider.fetches == 1  # the keys are cached

    provider.rotate()
    after = provider.token("robot-client", audience=AUDIENCE)
    answer = await send(await sdk("echo", after), request("three"))
    assert answer.artifacts[0].parts[0].text == "echo: three"
    assert provider.fetches == 2
    status, _, metadata = await refusal(hub, before)
    assert (status, metadata) == (401, {"jwt": "unknown_key"})


async def test_an_unreachable_jwks_is_a_503_that_says_so(hub, robot, provider):
    agent = await db(Agent.objects.get, slug="robot")
    gone = f"http://127.0.0.1:{free_port()}/jwks.json"
    await db(
        issuer_trust,
        issuer="https://down.example/",
        jwks_url=gone,
        audience=AUDIENCE,
        agent=agent,
        value="robot-client",
    )
    token = provider.token("robot-client", audience=AUDIENCE, iss="https://down.example/")
    status, message, metadata = await refusal(hub, token)
    assert status == 503
    assert metadata == {"jwt": "jwks_unavailable"}
    assert f"the JWKS at {gone} is unreachable" in message
