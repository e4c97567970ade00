"""Identity providers that misbehave cost only their own callers: a real JWKS server on
127.0.0.1 that answers junk, hangs or dribbles gets its callers a 503 saying why, within one
fetch's deadline, while everyone else is served as usual."""

from __future__ import annotations

import asyncio
import logging
import time

import httpx
import pytest
from a2a.types.a2a_pb2 import TaskState
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from a2a_core.asyncdb import db
from a2a_core.services.users import user_create
from tests.a2a_core.protocol.helpers import eventually, request, send
from tests.a2a_core.protocol.test_bad_input import V1, error_info
from tests.dashboard.test_live_security import PASSWORD, session_cookie
from tests.identity import AUDIENCE, JUNK_ANSWERS, dribble, hang

pytestmark = pytest.mark.live


async def jwt_call(http: httpx.AsyncClient, token: str) -> tuple[int, str, dict[str, str], float]:
    """(status, message, ErrorInfo metadata, seconds taken) of a REST call to echo."""
    started = time.monotonic()
    response = await http.get(
        "/a2a/echo/rest/tasks/none", headers={**V1, "Authorization": f"Bearer {token}"}
    )
    taken = time.monotonic() - started
    body = response.json()
    metadata = error_info(body).get("metadata", {}) if "error" in body else {}
    message = body["error"]["message"] if "error" in body else ""
    return response.status_code, message, metadata, taken


@pytest.mark.parametrize("answer", list(JUNK_ANSWERS))
async def test_a_jwks_answering_junk_is_a_503_that_says_what_was_wrong(
    hub, robot, provider, caplog, answer
):
    caplog.set_level(logging.WARNING)
    provider.misbehave, said = JUNK_ANSWERS[answer]
    token = provider.token("robot-client", audience=AUDIENCE)
    async with httpx.AsyncClient(base_url=hub.url, timeout=30) as http:
        status, message, metadata, _ = await jwt_call(http, token)
    assert (status, metadata) == (503, {"jwt": "jwks_unavailable"}), message
    assert message.startswith(f"cannot check the token: the JWKS at {provider.jwks_url} ")
    assert said in message
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert [r.getMessage() for r in caplog.records if r.exc_info] == []
    assert len([r for r in caplog.records if r.name == "a2a_hub.jwks"]) <= 1


async def test_junk_members_beside_a_good_key_are_skipped(hub, sdk, robot, provider):
    junk = [1, None, {"kty": 5}, {"kty": "OKP", "alg": ["a"]}, {"kty": "oct", "crv": "P-256"}]

    async def keys_among_junk(request: Request) -> Response:
        return JSONResponse({"keys": [*junk, provider.keys[0].public_jwk(), *junk]})

    provider.misbehave = keys_among_junk
    answer = await send(
        await sdk("echo", provider.token("robot-client", audience=AUDIENCE)), request("hi")
    )
    assert answer.artifacts[0].parts[0].text == "echo: hi"


async def test_a_jwks_that_dribbles_its_answer_is_cut_at_the_fetch_deadline(
    hub, robot, provider, settings
):
    # One byte every 0.2 s: no read waits long, so only a deadline on the whole fetch ends it.
    settings.HUB_JWKS_TIMEOUT = 1.5
    provider.misbehave = dribble
    async with httpx.AsyncClient(base_url=hub.url, timeout=20) as http:
        status, message, metadata, _ = await jwt_call(
            http, provider.token("robot-client", audience=AUDIENCE)
        )
    assert (status, metadata) == (503, {"jwt": "jwks_unavailable"}), message
    assert "did not answer within 1.5 s" in message


async def test_a_hanging_jwks_costs_only_its_own_callers(hub, sdk, robot, provider, settings):
    settings.HUB_JWKS_TIMEOUT = 4
    settings.HUB_JWKS_FAILURE_CACHE_SECONDS = 60
    await db(user_create, username="vera", password=PASSWORD, role="viewer")
    cookie = await session_cookie(hub.url, "vera")
    provider.misbehave = hang
    token = provider.token("robot-client", audience=AUDIENCE)
    async with httpx.AsyncClient(base_url=hub.url, timeout=120) as http:
        # 16 callers with a JWT at once: they wait for one fetch, and all hear why at its end.
        first_wave = [asyncio.create_task(jwt_call(http, token)) for _ in range(16)]

        async def fetching() -> bool:
            return provider.fetches >= 1

        await eventually(fetching)
        # Meanwhile, an agent with its hub token calls, and a person reads the dashboard.
        task = await send(await sdk("echo", robot), request("echo meanwhile"))
        page = await http.get("/agents/", headers={"Cookie": cookie})
        waiting = sum(not call.done() for call in first_wave)
        answers = await asyncio.gather(*first_wave)
        fetches = provider.fetches

        # Within HUB_JWKS_FAILURE_CACHE_SECONDS the failure is the answer: no fetch, no wait.
        second_wave = await asyncio.gather(*(jwt_call(http, token) for _ in range(16)))

    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert page.status_code == 200 and "echo" in page.text
    assert waiting == 16  # both were answered while the JWT callers still waited
    assert fetches == 1  # the JWT callers waited for one fetch
    for status, message, metadata, _ in answers + second_wave:
        assert (status, metadata) == (503, {"jwt": "jwks_unavailable"}), message
        assert "did not answer within 4 s" in message
    # One fetch's deadline each (not one per caller queued behind the others) ...
    assert max(taken for *_, taken in answers) < 4 + 3
    # ... and for the second wave no fetch's at all.
    assert max(taken for *_, taken in second_wave) < 4
    assert provider.fetches == 1


async def test_a_provider_that_recovers_is_asked_again_after_the_failure_cache_time(
    hub, sdk, robot, provider, settings
):
    settings.HUB_JWKS_FAILURE_CACHE_SECONDS = 1
    provider.misbehave, _ = JUNK_ANSWERS["a server error"]
    token = provider.token("robot-client", audience=AUDIENCE)
    async with httpx.AsyncClient(base_url=hub.url, timeout=30) as http:
        first, *_ = await jwt_call(http, token)
        again, *_ = await jwt_call(http, token)
        assert (first, again, provider.fetches) == (503, 503, 1)
        provider.misbehave = None
        await asyncio.sleep(1.1)
        answer = await send(await sdk("echo", token), request("echo back"))
    assert answer.artifacts[0].parts[0].text == "echo: back"
    assert provider.fetches == 2
