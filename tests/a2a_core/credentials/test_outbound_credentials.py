"""Agents behind their own auth, called through the hub with the credential an admin set:
each answers through the hub as it does directly, blocking and streaming; an OAuth2 token is
fetched, cached, and fetched again when it expires or is refused; a refused credential is the
agent-auth error, which never opens the agent's breaker."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any
from unittest.mock import ANY

import httpx
import pytest
from a2a.client import A2AClientError

from a2a_core.asyncdb import db
from a2a_core.models import Agent
from a2a_core.services.policy import policy_publish
from tests.a2a_core.credentials.helpers import direct_client, outcome, set_credential
from tests.a2a_core.protocol.test_bad_input import error_info
from tests.auth import (
    BEARER,
    Secret,
    TokenEndpoint,
    api_key,
    guarded_agent,
    guarded_grpc_agent,
    oauth2,
)

pytestmark = pytest.mark.live

BEARER_SECRET = "bearer-secret-7d1f3a9c4e"
API_SECRET = "apikey-secret-51be0c2d77"
CLIENT_SECRET = "client-secret-a6e2f90b13"
SAID = "vault refused the hub's credential: HTTP 401 (scheme bearer (HTTP bearer))"
CASES = [("JSONRPC", False), ("JSONRPC", True), ("HTTP+JSON", False), ("HTTP+JSON", True)]


@pytest.fixture
async def opened() -> AsyncIterator[list[Any]]:
    clients: list[Any] = []
    yield clients
    for client in clients:
        await client.aclose()


@pytest.fixture
def token_endpoint() -> Any:
    endpoint = TokenEndpoint("hub-client", CLIENT_SECRET).start()
    yield endpoint
    endpoint.stop()


async def _register(hub: Any, scripted: Any) -> Any:
    agent, _ = await hub.register_card(scripted.card_json)
    scripted.start(hub_url=hub.url)
    hub.agents.append(scripted)
    return agent


@pytest.mark.parametrize(("binding", "streaming"), CASES)
async def test_bearer_agent_answers_through_the_hub_as_directly(
    hub, sdk, opened, binding, streaming
):
    secret = Secret(BEARER_SECRET)
    scripted = guarded_agent(
        "vault", {"bearer": BEARER}, lambda given: given == secret.value, "bearer"
    )
    agent = await _register(hub, scripted)
    await set_credential(agent, scheme="bearer", secret=BEARER_SECRET)
    _, token = await hub.caller("alpha")

    direct = await direct_client(
        scripted,
        binding=binding,
        streaming=streaming,
        opened=opened,
        headers={"Authorization": f"Bearer {BEARER_SECRET}"},
    )
    through = await sdk("vault", token, binding=binding, streaming=streaming)
    expected = await outcome(direct, "stream 3")
    assert expected[0] == "TASK_STATE_COMPLETED"
    assert "".join(expected[1]) == "chunk 0;chunk 1;chunk 2;"
    assert await outcome(through, "stream 3") == expected


@pytest.mark.parametrize(("binding", "streaming"), CASES)
async def test_api_key_header_agent_answers_through_the_hub_as_directly(
    hub, sdk, opened, binding, streaming
):
    scripted = guarded_agent(
        "ledger",
        {"key": api_key("header", "X-API-Key")},
        lambda given: given == API_SECRET,
        "header",
        "X-API-Key",
    )
    agent = await _register(hub, scripted)
    await set_credential(agent, scheme="key", secret=API_SECRET)
    _, token = await hub.caller("alpha")

    direct = await direct_client(
        scripted,
        binding=binding,
        streaming=streaming,
        opened=opened,
        headers={"X-API-Key": API_SECRET},
    )
    through = await sdk("ledger", token, binding=binding, streaming=streaming)
    expected = await outcome(direct, "echo sealed")
    assert expected == ("TASK_STATE_COMPLETED", ["echo: sealed"])
    assert await outcome(through, "echo sealed") == expected


@pytest.mark.parametrize(
    ("location", "binding"),
    [("query", "JSONRPC"), ("query", "HTTP+JSON"), ("cookie", "JSONRPC"), ("cookie", "HTTP+JSON")],
)
async def test_api_key_in_query_or_cookie_reaches_the_agent(hub, sdk, location, binding):
    scripted = guarded_agent(
        "ledger",
        {"key": api_key(location, "api_key")},
        lambda given: given == API_SECRET,
        location,
        "api_key",
    )
    agent = await _register(hub, scripted)
    await set_credential(agent, scheme="key", secret=API_SECRET)
    _, token = await hub.caller("alpha")
    for streaming in (False, True):
        client = await sdk("ledger", token, binding=binding, streaming=streaming)
        assert await outcome(client, "echo kept") == ("TASK_STATE_COMPLETED", ["echo: kept"])


@pytest.mark.parametrize(("binding", "streaming"), CASES)
async def test_oauth2_agent_answers_through_the_hub_as_directly(
    hub, sdk, opened, token_endpoint, binding, streaming
):
    scripted = guarded_agent(
        "payroll", {"oauth": oauth2(token_endpoint.url)}, token_endpoint.valid, "bearer"
    )
    agent = await _register(hub, scripted)
    await set_credential(
        agent, scheme="oauth", secret=CLIENT_SECRET, client_id="hub-client", scopes=["agent:call"]
    )
    _, token = await hub.caller("alpha")

    async with httpx.AsyncClient() as http:
        fetched = (
            await http.post(
                token_endpoint.url,
                data={"grant_type": "client_credentials"},
                auth=("hub-client", CLIENT_SECRET),
            )
        ).json()["access_token"]
    direct = await direct_client(
        scripted,
        binding=binding,
        streaming=streaming,
        opened=opened,
        headers={"Authorization": f"Bearer {fetched}"},
    )
    through = await sdk("payroll", token, binding=binding, streaming=streaming)
    expected = await outcome(direct, "echo paid")
    assert expected == ("TASK_STATE_COMPLETED", ["echo: paid"])
    assert await outcome(through, "echo paid") == expected
    # The hub's token is cached: a second call asks the token endpoint nothing.
    assert await outcome(through, "echo again") == ("TASK_STATE_COMPLETED", ["echo: again"])
    assert token_endpoint.fetches == 2  # the test's own fetch, and the hub's one
    assert token_endpoint.scopes_asked[-1] == "agent:call"


async def test_an_expired_oauth2_token_is_fetched_again(hub, sdk, token_endpoint):
    token_endpoint.lifetime = 1.0
    scripted = guarded_agent(
        "payroll", {"oauth": oauth2(token_endpoint.url)}, token_endpoint.valid, "bearer"
    )
    agent = await _register(hub, scripted)
    await set_credential(agent, scheme="oauth", secret=CLIENT_SECRET, client_id="hub-client")
    _, token = await hub.caller("alpha")
    client = await sdk("payroll", token)

    assert await outcome(client, "echo one") == ("TASK_STATE_COMPLETED", ["echo: one"])
    await asyncio.sleep(1.2)  # the token's whole life
    assert await outcome(client, "echo two") == ("TASK_STATE_COMPLETED", ["echo: two"])
    assert token_endpoint.fetches == 2


async def test_a_refused_oauth2_token_is_fetched_again_once(hub, sdk, token_endpoint):
    scripted = guarded_agent(
        "payroll", {"oauth": oauth2(token_endpoint.url)}, token_endpoint.valid, "bearer"
    )
    agent = await _register(hub, scripted)
    await set_credential(agent, scheme="oauth", secret=CLIENT_SECRET, client_id="hub-client")
    _, token = await hub.caller("alpha")
    for streaming in (False, True):
        client = await sdk("payroll", token, streaming=streaming)
        assert await outcome(client, "echo one") == ("TASK_STATE_COMPLETED", ["echo: one"])
        # The agent forgets every token it issued (revoked, or its keys rotated).
        token_endpoint.revoke_all()
        assert await outcome(client, "echo two") == ("TASK_STATE_COMPLETED", ["echo: two"])
    assert token_endpoint.fetches == 3


async def test_wrong_secret_is_the_agent_auth_error_and_the_breaker_stays_closed(hub, sdk, capsys):
    await db(
        policy_publish,
        document={"breaker": {"failureThreshold": 1, "cooldownSeconds": 60}},
        reason="test",
    )
    scripted = guarded_agent(
        "vault", {"bearer": BEARER}, lambda given: given == BEARER_SECRET, "bearer"
    )
    agent = await _register(hub, scripted)
    wrong = "not-the-right-secret-9f8e7d"
    await set_credential(agent, scheme="bearer", secret=wrong)
    _, token = await hub.caller("alpha")

    client = await sdk("vault", token)
    for _ in range(2):  # a breaker told would be open after the first
        with pytest.raises(A2AClientError) as raised:
            await outcome(client, "echo hi")
        error = str(raised.value)
        assert SAID in error
        assert wrong not in error
    jsonrpc, rest = await _raw_calls(hub.url, token)
    assert jsonrpc.json()["error"]["code"] == -32061
    assert jsonrpc.json()["error"]["message"].startswith(SAID)
    assert rest.status_code == 502
    assert rest.json()["error"]["message"].startswith(SAID)
    assert error_info(rest.json())["reason"] == "AGENT_AUTH_FAILED"
    assert error_info(rest.json())["metadata"] == {
        "agent": "vault",
        "scheme": "bearer",
        "taskId": ANY,
    }
    assert wrong not in jsonrpc.text + rest.text

    # A stream shows the task failed, saying why.
    stream = await sdk("vault", token, streaming=True)
    state, _ = await outcome(stream, "echo hi")
    assert state == "TASK_STATE_FAILED"

    refused = await db(lambda: Agent.objects.get(slug="vault"))
    assert refused.auth_failure == SAID

    # The right secret: the next call goes through (the breaker never opened), and the
    # refusal is forgotten.
    await set_credential(refused, scheme="bearer", secret=BEARER_SECRET)
    client = await sdk("vault", token)
    assert await outcome(client, "echo hi") == ("TASK_STATE_COMPLETED", ["echo: hi"])
    assert (await db(lambda: Agent.objects.get(slug="vault"))).auth_failure == ""
    assert wrong not in capsys.readouterr().err


async def _raw_calls(url: str, token: str) -> tuple[httpx.Response, httpx.Response]:
    """SendMessage over JSON-RPC and REST, as any client sends it."""
    headers = {"Authorization": f"Bearer {token}", "A2A-Version": "1.0"}
    message = {"role": "ROLE_USER", "parts": [{"text": "echo raw"}]}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as http:
        jsonrpc = await http.post(
            "/a2a/vault/",
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendMessage",
                "params": {"message": {**message, "messageId": "raw-1"}},
            },
        )
        rest = await http.post(
            "/a2a/vault/rest/message:send", json={"message": {**message, "messageId": "raw-2"}}
        )
    return jsonrpc, rest


async def test_a_grpc_agent_gets_its_bearer_token_as_metadata(hub, sdk):
    secret = Secret(BEARER_SECRET)
    scripted = guarded_grpc_agent("vaultrpc", lambda given: given == secret.value)
    agent = await _register(hub, scripted)
    await set_credential(agent, scheme="bearer", secret=BEARER_SECRET)
    _, token = await hub.caller("alpha")
    for streaming in (False, True):
        client = await sdk("vaultrpc", token, streaming=streaming)
        assert await outcome(client, "echo rpc") == ("TASK_STATE_COMPLETED", ["echo: rpc"])
    secret.value = "another"
    client = await sdk("vaultrpc", token)
    with pytest.raises(
        A2AClientError, match="vaultrpc refused the hub's credential: gRPC UNAUTHENTICATED"
    ):
        await outcome(client, "echo rpc")


async def test_concurrent_calls_share_one_token_fetch(hub, sdk, token_endpoint):
    scripted = guarded_agent(
        "payroll", {"oauth": oauth2(token_endpoint.url)}, token_endpoint.valid, "bearer"
    )
    agent = await _register(hub, scripted)
    await set_credential(agent, scheme="oauth", secret=CLIENT_SECRET, client_id="hub-client")
    _, token = await hub.caller("alpha")
    client = await sdk("payroll", token)
    answers = await asyncio.gather(*(outcome(client, f"echo {i}") for i in range(12)))
    assert answers == [("TASK_STATE_COMPLETED", [f"echo: {i}"]) for i in range(12)]
    assert token_endpoint.fetches == 1
