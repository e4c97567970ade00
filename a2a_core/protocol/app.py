"""The Starlette app for everything agents talk to: the a2a-sdk's JSON-RPC and REST routes
for every registered agent and for the hub itself, the cards, discovery, /metrics, receipts
of decisions (/receipts/) and the inbox agents' long-poll endpoint."""

from __future__ import annotations

import hmac

from a2a.server.context import ServerCallContext
from a2a.server.routes import DefaultServerCallContextBuilder, create_rest_routes
from a2a.utils.constants import VERSION_HEADER
from a2a.utils.errors import VersionNotSupportedError
from django.conf import settings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Mount, Route, Router

from a2a_core import metrics, selectors
from a2a_core.asyncdb import db
from a2a_core.errors import ValidationFailed
from a2a_core.inbox.poll import inbox_endpoint
from a2a_core.protocol import errors as _errors  # noqa: F401  (registers the hub's errors)
from a2a_core.protocol.cards import agent_card_endpoint, hub_card_endpoint
from a2a_core.protocol.compat import rest_v03_routes
from a2a_core.protocol.gate import AgentGate, rest_caller
from a2a_core.protocol.handler import CALL_KEY, HubRequestHandler
from a2a_core.protocol.jsonrpc_relay import jsonrpc_routes
from a2a_core.protocol.receipts import receipt_endpoint
from a2a_core.protocol.signing import JWKS_PATH, jwks_endpoint
from a2a_core.protocol.versions import a2a_major
from a2a_core.tokens import bearer_token


class HubContextBuilder(DefaultServerCallContextBuilder):
    """Puts the gate's verdict (who calls whom) into the SDK's call context.

    Refuses an `A2A-Version` no method of the hub speaks (neither 1.x nor 0.x) with
    VersionNotSupported naming the versions to use; the SDK's dispatchers answer it in the
    binding's form with the request's id. (A known version sent with a method of the other
    one is the SDK's own check, which names the version that method needs.)"""

    def build(self, request: Request) -> ServerCallContext:
        version = request.headers.get(VERSION_HEADER, "").strip()
        if version and a2a_major(version) not in (0, 1):
            raise VersionNotSupportedError(
                f"A2A-Version {version!r} is not supported: this hub speaks A2A 1.0 (send "
                "'A2A-Version: 1.0' with the 1.0 methods) and 0.3 (send no A2A-Version, or "
                "0.3, with the 0.3 methods)"
            )
        context = super().build(request)
        context.state[CALL_KEY] = request.scope.get("hub.call")
        return context


def _a2a_routes(
    handler: HubRequestHandler, builder: HubContextBuilder, rpc_url: str
) -> list[BaseRoute]:
    """The JSON-RPC route at `rpc_url` (the SDK's dispatcher, SendMessage relayed:
    `a2a_core.protocol.jsonrpc_relay`) and the SDK's REST routes under `rpc_url` + `rest`."""
    return [
        *jsonrpc_routes(handler, rpc_url, builder),
        Mount(
            rpc_url + "rest",
            routes=[
                *rest_v03_routes(handler, builder),
                *create_rest_routes(handler, context_builder=builder),
            ],
        ),
    ]


async def discover(request: Request) -> Response:
    """GET /discover?skill=&tag=&status=&q=&limit=&cursor= for agents looking for peers."""
    caller = await rest_caller(request)
    if isinstance(caller, Response):
        return caller
    params = request.query_params
    try:
        limit = int(params.get("limit", "50"))
    except ValueError:
        limit = -1
    try:
        page = await db(
            selectors.agent_discover,
            skill=params.get("skill") or None,
            tag=params.get("tag") or None,
            status=params.get("status") or None,
            q=params.get("q") or None,
            limit=limit,
            cursor=params.get("cursor") or None,
        )
    except ValidationFailed as exc:
        return JSONResponse(
            {
                "error": {
                    "code": 400,
                    "status": "INVALID_ARGUMENT",
                    "message": exc.message,
                    "details": [
                        {
                            "@type": "type.googleapis.com/google.rpc.BadRequest",
                            "fieldViolations": [
                                {"field": p.field, "description": p.message} for p in exc.problems
                            ],
                        }
                    ],
                }
            },
            status_code=400,
        )
    return JSONResponse({"agents": page.agents, "nextCursor": page.next_cursor})


async def metrics_endpoint(request: Request) -> Response:
    """GET /metrics: Prometheus text format. With HUB_METRICS_TOKEN set, scrapers send it as a
    bearer token."""
    expected = settings.HUB_METRICS_TOKEN
    if expected and not hmac.compare_digest(bearer_token(request.headers) or "", expected):
        return PlainTextResponse(
            "send 'Authorization: Bearer <HUB_METRICS_TOKEN>' to read the metrics\n",
            status_code=401,
            headers={"WWW-Authenticate": 'Bearer realm="a2a-hub-metrics"'},
        )
    gauges = await db(metrics.shared_gauges)
    return Response(metrics.exposition(gauges), media_type=metrics.CONTENT_TYPE)


def build_agent_app() -> Starlette:
    handler = HubRequestHandler()
    builder = HubContextBuilder()
    a2a = Router(
        routes=[
            # The hub's own endpoint: /a2a/ (JSON-RPC) and /a2a/rest/ (REST).
            *_a2a_routes(handler, builder, "/"),
            # The hub's own card next to its own endpoint, as clients of /a2a/ look for it.
            Route("/.well-known/agent-card.json", hub_card_endpoint, methods=["GET"]),
            # Every registered agent, through the hub.
            Route("/{agent}/.well-known/agent-card.json", agent_card_endpoint, methods=["GET"]),
            Mount("/{agent}", routes=_a2a_routes(handler, builder, "/")),
        ]
    )
    return Starlette(
        routes=[
            Route("/.well-known/agent-card.json", hub_card_endpoint, methods=["GET"]),
            Route(JWKS_PATH, jwks_endpoint, methods=["GET"]),
            Route("/discover", discover, methods=["GET"]),
            Route("/metrics", metrics_endpoint, methods=["GET"]),
            Route("/receipts/{message_id:path}", receipt_endpoint, methods=["GET"]),
            Route("/inbox/{slug}/", inbox_endpoint, methods=["GET", "POST"]),
            Mount("/a2a", app=AgentGate(a2a)),
        ]
    )
