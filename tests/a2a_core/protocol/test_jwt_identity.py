"""Agents that sign in with their own identity provider's JWT (a real JWKS server on
127.0.0.1, keys made in the test) instead of a hub token, beside hub tokens."""

from __future__ import annotations

import logging
from collections import Counter

import httpx
import pytest

from a2a_core.asyncdb import db
from a2a_core.models import Agent, Message
from a2a_core.services.identity import issuer_trust
from tests.a2a_core.protocol.helpers import request, send
from tests.a2a_core.protocol.test_bad_input import V1, error_info, rpc
from tests.identity import AUDIENCE, Key
from tests.servers import free_port

pytestmark = pytest.mark.live


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


def junk_tokens(provider) -> dict[str, tuple[str | bytes, str]]:
    """Tokens shaped like JWTs with junk of some type in them -> the refusal code. Those with
    a header and claims are signed with the provider's real key: only what they hold is wrong."""
    kid = provider.keys[0].kid
    good = {"iss": provider.issuer, "sub": "robot-client", "aud": AUDIENCE, "exp": 4_000_000_000}
    header = {"alg": "ES256", "kid": kid}

    def signed(head: object = header, **claims: object) -> str:
        return provider.raw_token(head, {**good, **claims})

    return {
        "a kid that is a number": (signed({"alg": "ES256", "kid": 7}), "malformed"),
        "a kid that is an object": (signed({"alg": "ES256", "kid": {"k": kid}}), "malformed"),
        "a header that is a list": (signed([header]), "malformed"),
        "a header that is a string": (signed("ES256"), "malformed"),
        "an alg that is a number": (signed({"alg": 256, "kid": kid}), "malformed"),
        "an alg of none": (signed({"alg": "none", "kid": kid}), "malformed"),
        "a crit that is not a list": (signed({**header, "crit": 5}), "malformed"),
        "a crit naming a lone surrogate": (signed({**header, "crit": ["a\udcc2b"]}), "malformed"),
        "a kid holding a lone surrogate": (
            signed({"alg": "ES256", "kid": "\ud800"}),
            "unknown_key",
        ),
        "claims that are a list": (provider.raw_token(header, [good]), "malformed"),
        "an iss that is a number": (signed(iss=42), "malformed"),
        "an iss that is a list": (signed(iss=[provider.issuer]), "malformed"),
        "no iss": (provider.raw_token(header, {"sub": "robot-client"}), "missing_claim"),
        "an iss holding NUL": (signed(iss=provider.issuer + "\x00"), "untrusted_issuer"),
        "an iss holding a lone surrogate": (signed(iss="\ud800"), "untrusted_issuer"),
        "an iss longer than any trusted one": (signed(iss="i" * 600), "untrusted_issuer"),
        "an aud that is a number": (signed(aud=5), "wrong_audience"),
        "an aud list of numbers": (signed(aud=[5, None]), "wrong_audience"),
        "an exp that is text": (signed(exp="soon"), "malformed"),
        "an exp that is infinite": (signed(exp=float("inf")), "malformed"),
        "an exp before any calendar": (signed(exp=-(10**30)), "expired"),
        "an nbf that is NaN": (signed(nbf=float("nan")), "malformed"),
        "an iat that is text": (signed(iat="x"), "malformed"),
        "a sub that is an object": (signed(sub={"id": "robot-client"}), "malformed"),
        "padding in a part": (signed().replace(".", "==.", 1), "malformed"),
        "non-ASCII in a part": (b"Bearer " + "é.ü.ß".encode("latin-1"), "malformed"),
        "empty parts": ("..", "malformed"),
        "an empty signature": (signed().rsplit(".", 1)[0] + ".", "malformed"),
        "a part that is not base64": ("x.y.z", "malformed"),
    }


async def test_junk_of_any_type_in_a_jwt_is_a_401_saying_why_on_every_binding(
    hub, robot, provider, caplog
):
    caplog.set_level(logging.WARNING)
    seen: dict[str, tuple[str, str]] = {}
    async with httpx.AsyncClient(base_url=hub.url, timeout=30) as http:
        for case, (token, code) in junk_tokens(provider).items():
            auth = token if isinstance(token, bytes) else f"Bearer {token}".encode()
            headers = {**V1, "Authorization": auth}
            answers = {
                "JSON-RPC": await http.post(
                    "/a2a/echo/", json=rpc("GetTask", {"id": "none"}), headers=headers
                ),
                "REST": await http.get("/a2a/echo/rest/tasks/none", headers=headers),
                "discovery": await http.get("/discover", headers=headers),
            }
            for entry, response in answers.items():
                assert response.status_code == 401, (case, entry, response.text[:300])
                body = response.json()
                assert error_info(body)["metadata"] == {"jwt": code}, (case, entry, body)
                seen[f"{case} ({entry})"] = (code, body["error"]["message"])
    assert seen["a kid that is a number (REST)"][1].endswith("must be a string")
    assert "not a string" in seen["an iss that is a number (JSON-RPC)"][1]
    assert seen["an exp before any calendar (discovery)"][1].startswith("the token expired at ")
    assert "three base64url parts" in seen["padding in a part (REST)"][1]
    assert all(len(message) < 600 for _, message in seen.values())
    # Each refusal is a WARNING at most (ten a minute per kind), never an error or a traceback.
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert [r.getMessage() for r in caplog.records if r.exc_info] == []
    refusals = Counter(r.getMessage().split(")")[0] for r in caplog.records if "JWT" in r.msg)
    assert all(count <= 10 for count in refusals.values()), refusals
    assert provider.fetches == 1
    assert await sent_by("robot") == 0


async def test_an_oversized_authorization_header_is_refused_by_its_size(
    hub, robot, provider, settings
):
    # A JWT that would verify, but 1.3 MB: refused before its issuer or its keys are looked up.
    token = provider.token("robot-client", audience=AUDIENCE, padding="x" * 1_300_000)
    limit = settings.HUB_MAX_AUTHORIZATION_BYTES
    headers = {**V1, "Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=hub.url, timeout=30) as http:
        answers = {
            "JSON-RPC": await http.post(
                "/a2a/echo/", json=rpc("GetTask", {"id": "none"}), headers=headers
            ),
            "REST": await http.get("/a2a/echo/rest/tasks/none", headers=headers),
            "discovery": await http.get("/discover", headers=headers),
            "long-poll": await http.get("/inbox/robot/?wait=0", headers=headers),
        }
        fine = await http.get(
            "/discover",
            headers={
                "Authorization": f"Bearer {provider.token('robot-client', audience=AUDIENCE)}"
            },
        )
    for entry, response in answers.items():
        assert response.status_code == 431, (entry, response.text[:300])
        body = response.json()
        assert f"this hub reads at most {limit:,}" in body["error"]["message"], entry
    assert answers["JSON-RPC"].json()["error"]["code"] == -32060
    assert answers["REST"].json()["error"]["status"] == "INVALID_ARGUMENT"
    assert error_info(answers["REST"].json())["reason"] == "HEADER_TOO_LARGE"
    assert fine.status_code == 200
    assert provider.fetches == 1  # for the token that fit, not the one refused
