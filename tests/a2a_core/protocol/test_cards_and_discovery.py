"""Cards served by the hub, and the discovery endpoint agents use to find peers."""

from __future__ import annotations

import httpx
import pytest
from a2a.client import A2ACardResolver

from a2a_core.asyncdb import db
from a2a_core.services.agents import agent_register
from tests.factories import make_card

pytestmark = pytest.mark.live


@pytest.fixture
async def raw(hub):
    async with httpx.AsyncClient(base_url=hub.url, timeout=30) as client:
        yield client


async def test_agent_card_points_every_interface_at_the_hub_and_requires_its_token(hub, raw):
    scripted, _, _ = await hub.endpoint_agent("duc")
    async with httpx.AsyncClient() as http:
        card = await A2ACardResolver(http, f"{hub.url}/a2a/duc").get_agent_card()
    assert card.name == "duc"
    assert {(i.url, i.protocol_binding, i.protocol_version) for i in card.supported_interfaces} == {
        (f"{hub.url}/a2a/duc/", "JSONRPC", "1.0"),
        (f"{hub.url}/a2a/duc/rest", "HTTP+JSON", "1.0"),
        (f"{hub.url}/a2a/duc/", "JSONRPC", "0.3"),
    }
    assert scripted.url not in str(card)
    assert card.security_schemes["hubBearer"].http_auth_security_scheme.scheme == "Bearer"
    assert list(card.security_requirements[0].schemes) == ["hubBearer"]
    assert card.capabilities.streaming
    assert card.skills[0].id == "script"
    assert any(e.uri.endswith("/envelope/v1") for e in card.capabilities.extensions)


async def test_card_has_an_etag_and_revalidates_with_304(hub, raw):
    await hub.register_card(make_card("baron"))
    first = await raw.get("/a2a/baron/.well-known/agent-card.json")
    assert first.headers["cache-control"] == "public, max-age=60"
    again = await raw.get(
        "/a2a/baron/.well-known/agent-card.json", headers={"If-None-Match": first.headers["etag"]}
    )
    assert again.status_code == 304
    await db(agent_register, card=make_card("baron", version="2.0.0"))
    changed = await raw.get(
        "/a2a/baron/.well-known/agent-card.json", headers={"If-None-Match": first.headers["etag"]}
    )
    assert changed.status_code == 200
    assert changed.json()["version"] == "2.0.0"


async def test_card_of_an_unknown_agent_is_404(raw, hub):
    response = await raw.get("/a2a/nobody/.well-known/agent-card.json")
    assert response.status_code == 404


async def test_hub_has_its_own_card(raw, hub):
    card = (await raw.get("/.well-known/agent-card.json")).json()
    assert card["name"] == "A2A Hub"
    assert card["supportedInterfaces"][0]["url"] == f"{hub.url}/a2a/"
    assert {s["id"] for s in card["skills"]} == {"discover", "tasks"}


async def test_discovery_needs_a_token(raw, hub):
    response = await raw.get("/discover", params={"skill": "script"})
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")


async def test_discovery_finds_peers_by_skill_and_tag(raw, hub):
    await hub.register_card(
        make_card(
            "marie",
            skills=[
                {
                    "id": "test_strategy",
                    "name": "Test Strategy",
                    "description": "plans",
                    "tags": ["testing"],
                },
            ],
        )
    )
    await hub.register_card(
        make_card(
            "duc",
            skills=[
                {
                    "id": "architecture_review",
                    "name": "Architecture Review",
                    "description": "d",
                    "tags": ["review"],
                },
            ],
        )
    )
    _, token = await hub.caller("baron")
    headers = {"Authorization": f"Bearer {token}"}
    by_skill = (
        await raw.get("/discover", params={"skill": "test_strategy"}, headers=headers)
    ).json()
    assert [a["slug"] for a in by_skill["agents"]] == ["marie"]
    assert by_skill["agents"][0]["skills"][0]["tags"] == ["testing"]
    by_tag = (await raw.get("/discover", params={"tag": "review"}, headers=headers)).json()
    assert [a["slug"] for a in by_tag["agents"]] == ["duc"]


async def test_discovery_with_a_bad_status_says_which_values_are_valid(raw, hub):
    _, token = await hub.caller("baron")
    response = await raw.get(
        "/discover", params={"status": "sleepy"}, headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 400
    violation = response.json()["error"]["details"][0]["fieldViolations"][0]
    assert violation["field"] == "status" and "online" in violation["description"]


async def test_the_hub_endpoint_lists_your_tasks_across_agents(hub, sdk):
    from a2a.types.a2a_pb2 import ListTasksRequest

    from tests.a2a_core.protocol.helpers import request, send

    await hub.endpoint_agent("one")
    await hub.endpoint_agent("two")
    _, token = await hub.caller("alpha")
    a = await send(await sdk("one", token), request("echo a"))
    b = await send(await sdk("two", token), request("echo b"))
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"})
    from a2a.client import ClientConfig, ClientFactory

    try:
        client = await ClientFactory(ClientConfig(httpx_client=http)).create_from_url(hub.url)
        listed = await client.list_tasks(ListTasksRequest())
    finally:
        await http.aclose()
    assert {t.id for t in listed.tasks} == {a.id, b.id}
