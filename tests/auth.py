"""Agents behind their own auth, for tests: an ASGI guard in front of a real a2a-sdk agent
(bearer token, API key in a header, query or cookie, or OAuth2 access tokens), and a real
OAuth2 token endpoint (client credentials) that can also misbehave on demand."""

from __future__ import annotations

import asyncio
import base64
import secrets
import time
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs

import grpc
import grpc.aio
from google.protobuf.json_format import ParseDict
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from tests.agents import ScriptedAgent
from tests.servers import ServerThread


@dataclass
class Secret:
    """What the guard accepts now: `value` (changed by tests to rotate it)."""

    value: str
    refused: int = 0
    seen: list[str] = field(default_factory=list)


def _presented(scope: Scope, kind: str, name: str) -> str:
    headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])}
    if kind == "header":
        return headers.get(name.lower(), "")
    if kind == "query":
        return (parse_qs(scope.get("query_string", b"").decode()).get(name) or [""])[0]
    if kind == "cookie":
        jar: SimpleCookie = SimpleCookie(headers.get("cookie", ""))
        return jar[name].value if name in jar else ""
    auth = headers.get("authorization", "")
    return auth[7:] if auth[:7].lower() == "bearer " else ""


class Guard:
    """ASGI middleware: every request but the card's must present the credential."""

    def __init__(self, app: ASGIApp, check: Any, kind: str, name: str = "") -> None:
        self.app, self.check, self.kind, self.name = app, check, kind, name

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and not scope["path"].endswith("agent-card.json")
            and not self.check(_presented(scope, self.kind, self.name))
        ):
            response = JSONResponse(
                {"error": "unauthorized"}, status_code=401, headers={"WWW-Authenticate": "Bearer"}
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


# The schemes the cards declare (A2A 1.0 ProtoJSON).
BEARER = {"httpAuthSecurityScheme": {"scheme": "Bearer"}}


def api_key(location: str, name: str) -> dict[str, Any]:
    return {"apiKeySecurityScheme": {"location": location, "name": name}}


def oauth2(token_url: str) -> dict[str, Any]:
    return {
        "oauth2SecurityScheme": {
            "flows": {
                "clientCredentials": {"tokenUrl": token_url, "scopes": {"agent:call": "call"}}
            }
        }
    }


def guarded_agent(
    name: str, schemes: dict[str, dict[str, Any]], check: Any, kind: str, key_name: str = ""
) -> ScriptedAgent:
    """A scripted agent whose card declares `schemes` and whose server lets through only
    requests whose credential (`kind`: bearer, header, query, cookie) passes `check`."""
    agent = ScriptedAgent(name, guard=lambda app: Guard(app, check, kind, key_name))
    ParseDict(
        {
            "securitySchemes": schemes,
            "securityRequirements": [{"schemes": {n: {"list": []} for n in schemes}}],
        },
        agent.card,
    )
    return agent


@dataclass
class TokenEndpoint:
    """A real OAuth2 token endpoint (RFC 6749 client credentials, client_secret_basic).

    `mode` makes it misbehave: "html", "huge", "slow", "notjson", "nottoken" or "down" (500).
    Tokens live `lifetime` seconds; the agent's guard asks `valid`."""

    client_id: str
    client_secret: str
    lifetime: float = 3600.0
    mode: str = "ok"
    fetches: int = 0
    scopes_asked: list[str] = field(default_factory=list)
    issued: dict[str, float] = field(default_factory=dict)
    server: ServerThread | None = None

    def valid(self, token: str) -> bool:
        expiry = self.issued.get(token)
        return expiry is not None and time.monotonic() < expiry

    def revoke_all(self) -> None:
        self.issued.clear()

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"{self.server.url}/token"

    async def _token(self, request: Request) -> Response:
        self.fetches += 1
        if self.mode == "slow":
            await asyncio.sleep(30)
        if self.mode == "html":
            return Response("<html><body>Sign in</body></html>", media_type="text/html")
        if self.mode == "huge":
            return PlainTextResponse("x" * (2 * 1024 * 1024))
        if self.mode == "notjson":
            return PlainTextResponse("access_token=abc&token_type=bearer")
        if self.mode == "down":
            return PlainTextResponse("upstream broke", status_code=500)
        if self.mode == "nottoken":
            return JSONResponse({"token": "abc", "expires": "soon"})
        form = {k: v[0] for k, v in parse_qs((await request.body()).decode()).items()}
        given = request.headers.get("authorization", "")
        expected = base64.b64encode(f"{self.client_id}:{self.client_secret}".encode()).decode()
        if given != f"Basic {expected}" or form.get("grant_type") != "client_credentials":
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        self.scopes_asked.append(str(form.get("scope", "")))
        token = secrets.token_urlsafe(24)
        self.issued[token] = time.monotonic() + self.lifetime
        return JSONResponse(
            {"access_token": token, "token_type": "Bearer", "expires_in": self.lifetime}
        )

    def start(self) -> TokenEndpoint:
        app = Starlette(routes=[Route("/token", self._token, methods=["POST"])])
        self.server = ServerThread(app, lifespan="off").start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()


class GrpcBearer(grpc.aio.ServerInterceptor):
    """A gRPC agent's own auth: calls without `authorization: Bearer <check passes>` metadata
    end UNAUTHENTICATED."""

    def __init__(self, check: Any) -> None:
        self.check = check

    async def intercept_service(self, continuation: Any, details: Any) -> Any:
        handler = await continuation(details)
        auth = dict(details.invocation_metadata or ()).get("authorization", "")
        if handler is None or self.check(auth[7:] if auth.startswith("Bearer ") else ""):
            return handler

        async def refuse(request: Any, context: grpc.aio.ServicerContext) -> Any:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong token")

        async def refuse_stream(request: Any, context: grpc.aio.ServicerContext) -> Any:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong token")
            yield  # pragma: no cover

        make = (
            grpc.unary_stream_rpc_method_handler
            if handler.response_streaming
            else grpc.unary_unary_rpc_method_handler
        )
        return make(
            refuse_stream if handler.response_streaming else refuse,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


def guarded_grpc_agent(name: str, check: Any) -> ScriptedAgent:
    """A gRPC-only scripted agent behind a bearer token (its card declares it)."""
    agent = ScriptedAgent(name, binding="GRPC", grpc_interceptors=[GrpcBearer(check)])
    ParseDict(
        {
            "securitySchemes": {"bearer": BEARER},
            "securityRequirements": [{"schemes": {"bearer": {"list": []}}}],
        },
        agent.card,
    )
    return agent
