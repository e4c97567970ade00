"""Cards served by the hub, and the discovery endpoint agents use to find peers."""

from __future__ import annotations

import asyncio
import json

import httpx
import jsonschema
import pytest
from a2a.client import A2ACardResolver
from a2a.compat.v0_3 import types as types_v03
from a2a.types.a2a_pb2 import AgentCard
from google.protobuf.json_format import ParseDict

from a2a_core.asyncdb import db
from a2a_core.services.agents import agent_register
from tests.a2a_core.cli.helpers import run_cli
from tests.a2a_core.protocol.helpers import request, send
from tests.a2a_core.protocol.proto_schema import json_schema
from tests.agents import ScriptedAgent
from tests.factories import make_card
from tests.peers import PeerProcess, peer_python

CARD = "/.well-known/agent-card.json"
V1 = {"A2A-Version": "1.0"}
V03 = {"A2A-Version": "0.3"}
SDK03 = ["a2a-sdk[http-server]==0.3.26", "httpx", "uvicorn"]
CARD_SCHEMA = json_schema(AgentCard.DESCRIPTOR)

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
        (f"{hub.url}/a2a/duc/rest", "HTTP+JSON", "0.3"),
    }
    assert scripted.url not in str(card)
    assert card.security_schemes["hubBearer"].http_auth_security_scheme.scheme == "Bearer"
    assert list(card.security_requirements[0].schemes) == ["hubBearer"]
    assert card.capabilities.streaming
    assert card.skills[0].id == "script"
    assert any(e.uri.endswith("/envelope/v1") for e in card.capabilities.extensions)


def schema_violations(document: dict) -> list[str]:
    validator = jsonschema.Draft202012Validator(CARD_SCHEMA)
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
        for e in validator.iter_errors(document)
    ]


@pytest.mark.parametrize("sent_as", ["header", "query parameter"])
@pytest.mark.parametrize(
    "path", ["/a2a/duc/.well-known/agent-card.json", "/.well-known/agent-card.json"]
)
async def test_a_1_0_client_gets_a_card_that_is_exactly_the_1_0_schema(hub, raw, path, sent_as):
    """A2A 1.0 lets a client send its A2A-Version as a header or a query parameter."""
    await hub.register_card(make_card("duc"))
    if sent_as == "header":
        response = await raw.get(path, headers=V1)
    else:
        response = await raw.get(path, params=V1)
    assert response.headers["vary"] == "A2A-Version"
    assert schema_violations(response.json()) == []


async def test_the_1_0_schema_of_the_test_refuses_the_0_3_fields(hub, raw):
    await hub.register_card(make_card("duc"))
    legacy = (await raw.get("/a2a/duc/.well-known/agent-card.json", headers=V03)).json()
    assert any("'url'" in v and "were unexpected" in v for v in schema_violations(legacy))


@pytest.mark.parametrize(
    ("headers", "unversioned"), [(V03, "agent"), ({}, "0.3")], ids=["0.3 header", "no header"]
)
async def test_a_0_3_client_gets_a_view_listing_every_interface_rest_included(
    hub, raw, settings, headers, unversioned
):
    """A 1.0 agent's card, asked for as 0.3 (or with no version where the hub is set to answer
    that with the 0.3 view): the hub's 0.3 interfaces reach the 1.0 agent."""
    settings.HUB_CARD_UNVERSIONED = unversioned
    await hub.register_card(make_card("duc"))
    card = (await raw.get("/a2a/duc/.well-known/agent-card.json", headers=headers)).json()
    assert card["url"] == f"{hub.url}/a2a/duc/"
    assert card["preferredTransport"] == "JSONRPC"
    assert card["protocolVersion"] == "0.3"
    assert card["additionalInterfaces"] == [
        {"url": f"{hub.url}/a2a/duc/rest", "transport": "HTTP+JSON"}
    ]
    assert card["security"] == [{"hubBearer": []}]
    # A 1.x client that sent no header still finds its interfaces.
    assert {i["protocolVersion"] for i in card["supportedInterfaces"]} == {"1.0", "0.3"}


@pytest.mark.parametrize(
    ("transport", "mode", "agent_version", "unversioned"),
    [
        ("JSONRPC", "send", "0.3", "agent"),
        ("HTTP+JSON", "stream", "0.3", "agent"),
        ("JSONRPC", "stream", "1.0", "0.3"),
        ("HTTP+JSON", "send", "1.0", "0.3"),
    ],
)
async def test_an_a2a_sdk_0_3_client_works_through_the_hub_from_the_card(
    hub, settings, transport, mode, agent_version, unversioned
):
    """The 0.3 client sends no A2A-Version for the card: it reads the 0.3 view of an agent
    that serves 0.3 clients, and of any agent where the hub is set to answer that way."""
    settings.HUB_CARD_UNVERSIONED = unversioned
    await hub.endpoint_agent("echo", version=agent_version)
    _, token = await hub.caller("old-timer")
    python = peer_python("sdk03", SDK03)
    out = PeerProcess(
        python, "sdk03_client.py", hub.url, "echo", token, transport, "echo hi", mode
    ).run()
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert lines, out
    url = f"{hub.url}/a2a/echo/" if transport == "JSONRPC" else f"{hub.url}/a2a/echo/rest"
    assert lines[-1] == {
        "transport": transport,
        "url": url.rstrip("/") if transport == "HTTP+JSON" else url,
        "kind": "task",
        "state": "completed",
        "text": ["echo: hi"],
    }


UNVERSIONED_SETTINGS = ["agent", "0.3", "1.0"]


def read_as(card: dict, version: str) -> None:
    """`card` read as the a2a-sdk reads a card of `version`: 1.0 exactly (no field of 0.3
    beside), or 0.3 (its top-level `url` and all); an AssertionError or the SDK's error if not."""
    if version == "1.0":
        assert schema_violations(card) == []
        ParseDict(card, AgentCard())  # no ignore_unknown_fields: a 0.3 field would fail it
    else:
        legacy = types_v03.AgentCard.model_validate(card)
        assert legacy.url


@pytest.mark.parametrize("unversioned", UNVERSIONED_SETTINGS)
@pytest.mark.parametrize("agent_version", ["1.0", "0.3"])
async def test_a_card_fetched_without_a_version_is_in_the_version_the_hub_is_set_to(
    hub, raw, settings, agent_version, unversioned
):
    """HUB_CARD_UNVERSIONED: "agent" (the default) answers a card request without
    A2A-Version as the agent itself does (an a2a-sdk server adds the 0.3 fields only when its
    card lists a 0.3 interface): a 1.0 agent's card is exactly 1.0, what a client checking the
    1.0 schema (the conformance suite's CARD-STRUCT-001) expects; a 0.3 agent's card is the 0.3
    view. "0.3" and "1.0" answer every such request in that version."""
    settings.HUB_CARD_UNVERSIONED = unversioned
    agent, _, _ = await hub.endpoint_agent("duc", version=agent_version)
    own = (await raw.get(f"{agent.url}{CARD}")).json()
    served = (await raw.get(f"/a2a/duc{CARD}")).json()

    expected = agent_version if unversioned == "agent" else unversioned
    read_as(served, expected)
    assert ("url" in served) is (expected == "0.3")
    if unversioned == "agent":
        assert ("url" in served) is ("url" in own)
    # A version asked for is answered in it, whatever the setting.
    read_as((await raw.get(f"/a2a/duc{CARD}", headers=V1)).json(), "1.0")
    read_as((await raw.get(f"/a2a/duc{CARD}", headers=V03)).json(), "0.3")


# "1" * 5000 is a version by its grammar, whose number Python refuses to read (over 4,300
# digits): not one the hub knows.
JUNK_VERSIONS = ["", "abc", "1.0.0.0.0x", "\u00e9", "1" * 5000, "-1", "0x10", "1.0; 0.3", "v"]


@pytest.mark.parametrize("sent_as", ["header", "query parameter"])
@pytest.mark.parametrize("agent_version", ["1.0", "0.3"])
async def test_a_card_asked_for_with_a_junk_version_is_the_one_asked_for_without(
    hub, raw, agent_version, sent_as
):
    interface = {"url": "http://127.0.0.1:9/", "protocolBinding": "JSONRPC"}
    await hub.register_card(
        make_card("duc", interfaces=[{**interface, "protocolVersion": agent_version}])
    )
    unversioned = await raw.get(f"/a2a/duc{CARD}")
    for junk in JUNK_VERSIONS:
        if sent_as == "header":
            response = await raw.get(f"/a2a/duc{CARD}", headers={"A2A-Version": junk.encode()})
        else:
            response = await raw.get(f"/a2a/duc{CARD}", params={"A2A-Version": junk})
        assert response.status_code == 200, junk
        assert response.content == unversioned.content, junk


@pytest.mark.parametrize("version", ["banana", "1" * 5000, "0.3.0.0.0.0.1", "0"])
async def test_an_agent_card_with_any_protocol_version_is_served_without_a_version(
    hub, raw, version
):
    """What an agent's card says of its interfaces' versions decides the view a request without
    a version gets: a 0.x version is the 0.3 view, anything else (junk too) the 1.0 one."""
    interface = {"url": "http://127.0.0.1:9/", "protocolBinding": "JSONRPC"}
    await hub.register_card(
        make_card("duc", interfaces=[{**interface, "protocolVersion": version}])
    )
    response = await raw.get(f"/a2a/duc{CARD}")
    assert response.status_code == 200
    read_as(response.json(), "0.3" if version in ("0.3.0.0.0.0.1", "0") else "1.0")


@pytest.mark.parametrize("unversioned", UNVERSIONED_SETTINGS)
async def test_the_hub_s_own_card_without_a_version_is_the_0_3_view_unless_set_to_1_0(
    hub, raw, settings, unversioned
):
    """The hub serves 0.3 clients too, so by its own card it is a "0.3" agent."""
    settings.HUB_CARD_UNVERSIONED = unversioned
    read_as((await raw.get(CARD)).json(), "1.0" if unversioned == "1.0" else "0.3")


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


@pytest.mark.parametrize("param", ["skill", "tag", "q", "cursor"])
async def test_discovery_with_a_nul_character_is_a_400_naming_the_parameter(raw, hub, param):
    _, token = await hub.caller("baron")
    response = await raw.get(
        "/discover", params={param: "a\x00b"}, headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 400
    violation = response.json()["error"]["details"][0]["fieldViolations"][0]
    assert violation["field"] == param and "U+0000" in violation["description"]


# Cards that carry the 0.3 fields beside the 1.0 ones: what a2a-sdk 1.x servers serve when
# they serve 0.3 clients too, what a2a-adapter (PyPI) serves for a LangGraph agent, and what
# this hub serves a client that sends no A2A-Version. Each registers as the 1.0 card it is.

V03_FIELDS = {"url", "preferredTransport", "protocolVersion", "additionalInterfaces", "security"}


def adapter_card(name: str, url: str) -> dict:
    """A LangGraph agent's card as a2a-adapter serves it: the 1.0 card, with the top-level
    `url`, `preferredTransport` and `protocolVersion` a 0.3 client reads added."""
    return {
        **make_card(name, url=url),
        "url": url,
        "preferredTransport": "JSONRPC",
        "protocolVersion": "1.0",
    }


async def registered(*args: str, env: dict[str, str] | None = None) -> str:
    """`manage.py a2a register ARGS` in its own process, as from a shell: its output."""
    done = await asyncio.to_thread(run_cli, "register", *args, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


async def served_to_1_0(raw: httpx.AsyncClient, slug: str) -> dict:
    card = (await raw.get(f"/a2a/{slug}/.well-known/agent-card.json", headers=V1)).json()
    assert schema_violations(card) == []
    assert V03_FIELDS.isdisjoint(card)
    return card


async def test_a_langgraph_card_from_a2a_adapter_registers_and_is_served_as_pure_1_0(
    hub, sdk, raw, tmp_path
):
    scripted, _, _ = await hub.endpoint_agent("graph-echo")
    path = tmp_path / "langgraph.json"
    path.write_text(json.dumps(adapter_card("langgraph", f"{scripted.url}/")))

    assert "registered langgraph (endpoint" in await registered(str(path))

    card = await served_to_1_0(raw, "langgraph")
    assert card["supportedInterfaces"][0]["url"] == f"{hub.url}/a2a/langgraph/"
    _, token = await hub.caller("alpha")
    task = await send(await sdk("langgraph", token), request("echo through"))
    assert [p.text for a in task.artifacts for p in a.parts] == ["echo: through"]


async def test_register_url_takes_the_card_an_sdk_agent_serving_0_3_too_serves(hub, raw):
    scripted = ScriptedAgent("compat", version="0.3").start()
    hub.agents.append(scripted)
    served = (await raw.get(f"{scripted.url}/.well-known/agent-card.json")).json()
    assert {"url", "preferredTransport", "supportedInterfaces"} <= served.keys()

    assert "registered compat (endpoint" in await registered("--url", scripted.url)

    await served_to_1_0(raw, "compat")


@pytest.mark.parametrize(
    ("agent_version", "a2a_version"), [("1.0", None), ("0.3", None), ("1.0", "1.0")]
)
async def test_another_hub_registers_this_hub_s_card_with_its_signature_checked(
    hub, raw, tmp_path, agent_version, a2a_version
):
    """Hub to hub: this hub's card of an agent, as it serves it to a client that sends no
    A2A-Version (in the agent's own version: the 0.3 fields beside for an agent serving 0.3
    clients, else exactly 1.0) and to a 1.0 client, registers elsewhere, signed: the other hub
    pins this hub's JWKS as a card signer."""
    interface = {"url": "http://127.0.0.1:9/", "protocolBinding": "JSONRPC"}
    await hub.register_card(
        make_card("duc", interfaces=[{**interface, "protocolVersion": agent_version}])
    )
    headers = {"A2A-Version": a2a_version} if a2a_version else {}
    card = (await raw.get("/a2a/duc/.well-known/agent-card.json", headers=headers)).json()
    assert ("url" in card) is (a2a_version is None and agent_version == "0.3")
    path = tmp_path / "duc-at-the-other-hub.json"
    path.write_text(json.dumps(card))

    pinned = {"HUB_CARD_SIGNER_JWKS": f"{hub.url}/.well-known/jwks.json"}
    out = await registered(str(path), "--slug", "duc-elsewhere", env=pinned)

    assert "card signature: its signature verifies" in out
    mirrored = await served_to_1_0(raw, "duc-elsewhere")
    assert mirrored["skills"] == card["skills"]


async def test_another_hub_registers_this_hub_s_card_by_its_url(hub, raw):
    """`a2a register --url` at the other hub, given this hub's address of an agent."""
    await hub.register_card(make_card("duc"))

    pinned = {"HUB_CARD_SIGNER_JWKS": f"{hub.url}/.well-known/jwks.json"}
    out = await registered("--url", f"{hub.url}/a2a/duc", "--slug", "duc-elsewhere", env=pinned)

    assert "registered duc-elsewhere (endpoint" in out
    assert "card signature: its signature verifies" in out
    mirrored = await served_to_1_0(raw, "duc-elsewhere")
    assert mirrored["name"] == "duc"
    assert mirrored["supportedInterfaces"][0]["url"] == f"{hub.url}/a2a/duc-elsewhere/"
