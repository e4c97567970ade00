"""Agent cards as the hub serves them: every interface points at the hub, which adds its
bearer security scheme; and the hub's own card.

Each card is served in two views, told apart by the request's `A2A-Version` (a header, or the
query parameter A2A 1.0 allows instead):
- `A2A-Version: 1.x` (any version from 1 up): the A2A 1.0 `AgentCard` exactly, nothing else,
  signed by the hub (`signatures`, see `a2a_core.protocol.signing`);
- a 0.x one: the same card with the 0.3 fields added (`url`, `preferredTransport`,
  `protocolVersion`, `additionalInterfaces`, 0.3-style `security`), as an a2a-sdk 1.x server
  that also serves 0.3 clients serves its card to everyone. It carries the 1.0 card's
  signature: a 1.x client that reads this view drops the 0.3 fields and verifies it; the 0.3
  fields are not covered.
- none, or one that is not a version (HUB_CARD_UNVERSIONED): by default the view the agent
  itself serves such a request, as the a2a-sdk serves a card: the 0.3 one when its own card
  lists a 0.3 interface (it serves 0.3 clients), else the 1.0 one. The hub's own card is the 0.3 view (the hub serves 0.3
  clients). A request without a version cannot say which client sent it: the a2a-sdk 0.3
  client sends nothing and needs the top-level `url`; a 1.x client that fetches with a bare
  `A2ACardResolver` (Microsoft Agent Framework, say) sends nothing and reads either view; a
  client that accepts only the 1.0 schema (the conformance suite's CARD-STRUCT-001) sends
  nothing either. Each gets through the hub what it gets from the agent.
The a2a-sdk 1.x `ClientFactory` (and Google ADK, which uses it) sends `A2A-Version: 1.0`.

gRPC (HUB_CARD_GRPC): an agent's card lists the hub's gRPC interface when the agent's own card
lists one, by default. Its `url` is `host:port`, the form `grpc.aio.insecure_channel` (the
a2a-sdk client's channel factory) dials; an `http://` or `grpc://` URL does not resolve there.
Google ADK refuses a card it fetched if any interface is not at the card's own origin (scheme,
host and port), which a gRPC port of its own never is, in any form: so the card mirrors the
agent, and ADK reads it through the hub whenever it reads the agent's own.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentSkill,
)
from a2a.utils.constants import VERSION_HEADER, TransportProtocol
from django.conf import settings
from google.protobuf.json_format import MessageToDict, ParseDict
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from a2a_core.asyncdb import db
from a2a_core.models import Agent
from a2a_core.protocol import grpc_binding
from a2a_core.protocol.signing import sign
from a2a_core.protocol.versions import a2a_major
from a2a_core.schemas.envelopes import ENVELOPE_EXTENSION

SECURITY_SCHEME = "hubBearer"
CACHE_CONTROL = "public, max-age=60"


def hub_version() -> str:
    try:
        return version("a2a-hub")
    except PackageNotFoundError:
        return "0.0.0"


def base_url(request: Request) -> str:
    """Where callers reach the hub: HUB_PUBLIC_URL, else the scheme and host they used."""
    return settings.HUB_PUBLIC_URL or f"{request.url.scheme}://{request.url.netloc}"


def hub_interfaces(
    base: str, path: str, *, tenant: str = "", grpc: bool = True
) -> list[AgentInterface]:
    """Both HTTP bindings in 1.0, then both in 0.3: 0.3 clients are served on the same
    endpoints (they send no A2A-Version), and the 0.3 view of the card lists the 0.3 ones.
    Then gRPC (1.0), when `grpc` and the hub serves it: one address for every agent, `tenant`
    (the agent's slug; none for the hub itself) says which."""
    urls = {
        TransportProtocol.JSONRPC: f"{base}{path}/",
        TransportProtocol.HTTP_JSON: f"{base}{path}/rest",
    }
    interfaces = [
        AgentInterface(url=url, protocol_binding=binding, protocol_version=version)
        for version in ("1.0", "0.3")
        for binding, url in urls.items()
    ]
    if grpc and grpc_binding.enabled():
        interfaces.append(
            AgentInterface(
                url=grpc_binding.address(base),
                protocol_binding=TransportProtocol.GRPC,
                protocol_version="1.0",
                tenant=tenant,
            )
        )
    return interfaces


def _secure(card: AgentCard) -> None:
    del card.security_requirements[:]
    card.security_schemes.clear()
    scheme = card.security_schemes[SECURITY_SCHEME].http_auth_security_scheme
    scheme.scheme = "Bearer"
    scheme.description = "The token the hub issued to the calling agent when it was registered."
    card.security_requirements.add().schemes[SECURITY_SCHEME].SetInParent()


def _declare_envelope(capabilities: AgentCapabilities) -> None:
    if not any(ext.uri == ENVELOPE_EXTENSION for ext in capabilities.extensions):
        capabilities.extensions.append(
            AgentExtension(
                uri=ENVELOPE_EXTENSION,
                description="Typed message envelopes (task_request, review_request, question, "
                "broadcast, ...) in a data part, validated by the hub.",
                required=False,
            )
        )


Rendered = tuple[bytes, str]
"""A card's JSON body and its ETag."""


@dataclass(frozen=True)
class CardViews:
    """A card rendered for 1.x clients (`v1`) and for 0.3 clients (`v03`); `unversioned` is
    the one of them a request without `A2A-Version` gets."""

    v1: Rendered
    v03: Rendered
    unversioned: Rendered


def _render(card: AgentCard, base: str, *, unversioned: str) -> CardViews:
    """`unversioned`: "1.0" or "0.3", the view a request without a version gets."""
    sign(card, base)
    v1, v03 = _body(MessageToDict(card)), _body(agent_card_to_dict(card))
    return CardViews(v1=v1, v03=v03, unversioned=v1 if unversioned == "1.0" else v03)


def _body(document: dict[str, Any]) -> Rendered:
    body = json.dumps(document, separators=(",", ":")).encode()
    return body, f'W/"{hashlib.sha256(body).hexdigest()[:32]}"'


def speaks_1_0(request: Request) -> bool | None:
    """Whether a card request comes from an A2A 1.x client: its `A2A-Version` header, else
    its `A2A-Version` query parameter, is 1 or more (true) or 0.x (false); None when it sends
    none, or something that is not a version."""
    version = request.headers.get(VERSION_HEADER) or request.query_params.get(VERSION_HEADER)
    major = a2a_major(version or "")
    return None if major is None else major >= 1


def _declares(card: dict[str, Any], binding: str) -> bool:
    """Whether an agent's own card (stored, ProtoJSON) lists an interface with `binding`."""
    return any(i.get("protocolBinding") == binding for i in card.get("supportedInterfaces", []))


def _serves_0_3(card: dict[str, Any]) -> bool:
    """Whether an agent's own card lists an interface for 0.3 clients (no version, or a 0.x
    one), so that an a2a-sdk server adds the 0.3 fields to it (`to_compat_agent_card`). Read
    with `a2a_major`, as the SDK's `is_legacy_version` would fail on a version past 4,300
    digits, which a registered card may hold."""
    return any(
        not i.get("protocolVersion") or a2a_major(i["protocolVersion"]) == 0
        for i in card.get("supportedInterfaces", [])
    )


def _unversioned(card: dict[str, Any] | None) -> str:
    """The view (1.0 or 0.3) a card request without a version gets (HUB_CARD_UNVERSIONED);
    `card` is the agent's own, None for the hub's card."""
    choice = settings.HUB_CARD_UNVERSIONED
    if choice != "agent":
        return str(choice)
    return "0.3" if card is None or _serves_0_3(card) else "1.0"


def _lists_grpc(card: dict[str, Any] | None) -> bool:
    """Whether a card the hub serves lists its gRPC interface (HUB_CARD_GRPC); `card` is the
    agent's own, None for the hub's card."""
    choice = settings.HUB_CARD_GRPC
    if not grpc_binding.enabled() or choice == "never":
        return False
    return choice == "always" or card is None or _declares(card, TransportProtocol.GRPC)


@lru_cache(maxsize=2048)
def _agent_card(
    slug: str,
    digest: str,
    card_json: str,
    base: str,
    push: bool,
    _key: str,
    grpc: str,
    unversioned: str,
) -> CardViews:
    card = ParseDict(json.loads(card_json), AgentCard(), ignore_unknown_fields=True)
    del card.supported_interfaces[:]
    card.supported_interfaces.extend(
        hub_interfaces(base, f"/a2a/{slug}", tenant=slug, grpc=bool(grpc))
    )
    # The hub streams for every agent (it relays, or synthesizes from a blocking answer).
    card.capabilities.streaming = True
    # The hub sends push notifications for every agent's tasks (HUB_PUSH_ENABLED).
    card.capabilities.push_notifications = push
    card.capabilities.extended_agent_card = False
    _declare_envelope(card.capabilities)
    _secure(card)
    return _render(card, base, unversioned=unversioned)


def served_card(agent: Agent, base: str) -> CardViews:
    """The agent's card as the hub serves it (signed by the hub)."""
    return _agent_card(
        agent.slug,
        agent.card_digest,
        json.dumps(agent.card),
        base,
        settings.HUB_PUSH_ENABLED,
        settings.HUB_CARD_SIGNING_KEY,
        grpc_binding.address(base) if _lists_grpc(agent.card) else "",
        _unversioned(agent.card),
    )


def hub_card(base: str) -> CardViews:
    """The hub's own card (signed); the same ETag while nothing it shows changes."""
    return _hub_card(
        base,
        settings.HUB_NAME,
        settings.HUB_PUSH_ENABLED,
        settings.HUB_CARD_SIGNING_KEY,
        grpc_binding.address(base) if _lists_grpc(None) else "",
        _unversioned(None),
    )


@lru_cache(maxsize=16)
def _hub_card(
    base: str, name: str, push: bool, _key: str, grpc: str, unversioned: str
) -> CardViews:
    card = AgentCard(
        name=name,
        description=(
            "A switchboard for A2A agents. Each registered agent is reachable at "
            f"{base}/a2a/<agent>/ with its own card; this endpoint answers for the tasks "
            f"you are a party to across all of them. Find peers with GET {base}/discover."
        ),
        version=hub_version(),
        supported_interfaces=hub_interfaces(base, "/a2a", grpc=bool(grpc)),
        capabilities=AgentCapabilities(streaming=True, push_notifications=push),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=[
            AgentSkill(
                id="discover",
                name="Discover agents",
                description="GET /discover?skill=&tag=&status=&q= lists registered agents, "
                "their status and skills.",
                tags=["discovery", "registry"],
            ),
            AgentSkill(
                id="tasks",
                name="Your tasks everywhere",
                description="GetTask, ListTasks and SubscribeToTask here cover every task you "
                "are a party to, whichever agent it was sent to.",
                tags=["tasks"],
            ),
        ],
    )
    _declare_envelope(card.capabilities)
    _secure(card)
    return _render(card, base, unversioned=unversioned)


def card_response(request: Request, views: CardViews) -> Response:
    speaks = speaks_1_0(request)
    body, etag = views.unversioned if speaks is None else views.v1 if speaks else views.v03
    # Shared caches must keep the two views apart.
    headers = {"ETag": etag, "Cache-Control": CACHE_CONTROL, "Vary": VERSION_HEADER}
    match = request.headers.get("if-none-match", "")
    if match and (match.strip() == "*" or etag in [m.strip() for m in match.split(",")]):
        return Response(status_code=304, headers=headers)
    return Response(body, media_type="application/json", headers=headers)


async def agent_card_endpoint(request: Request) -> Response:
    slug = request.path_params["agent"]
    agent = await db(lambda: Agent.objects.filter(slug=slug).first())
    if agent is None:
        return JSONResponse(
            {
                "error": {
                    "code": 404,
                    "status": "NOT_FOUND",
                    "message": f"no agent {slug!r} is registered",
                }
            },
            status_code=404,
        )
    return card_response(request, served_card(agent, base_url(request)))


async def hub_card_endpoint(request: Request) -> Response:
    return card_response(request, hub_card(base_url(request)))


def discovery_json(page: Any) -> dict[str, Any]:
    return {"agents": page.agents, "nextCursor": page.next_cursor}
