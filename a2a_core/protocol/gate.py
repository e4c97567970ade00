"""The gate in front of every A2A endpoint: a bounded body, a bearer token, who calls whom.

Runs before the a2a-sdk dispatchers. A request it refuses gets the HTTP status that says why
(401, 403, 404, 413) and a body in the binding's own error form: a JSON-RPC error object on
the JSON-RPC endpoint, a `google.rpc.Status` on the REST one. The header limit
(`refuse_oversized_headers`, HUB_MAX_AUTHORIZATION_BYTES: 431) is applied by the HTTP router
to every request, before any app, and by `authenticate` to a token from any binding.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from a2a.server.request_handlers.response_helpers import build_error_response
from a2a.utils.error_handlers import build_rest_error_payload
from a2a.utils.errors import A2AError, InvalidParamsError, InvalidRequestError, JSONParseError
from django.conf import settings
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from a2a_core import agent_cache, tracing
from a2a_core.asyncdb import db
from a2a_core.delivery.call import Call
from a2a_core.models import Agent
from a2a_core.models import Scope as AgentScope
from a2a_core.protocol.errors import (
    AgentNotFoundError,
    HeaderTooLargeError,
    PayloadTooLargeError,
    PermissionDeniedError,
    UnauthenticatedError,
    http_status,
)
from a2a_core.protocol.identity import agent_for_jwt, looks_like_jwt
from a2a_core.schemas.a2a import holds_lone_surrogate, holds_nul
from a2a_core.services.agents import RESERVED_SLUGS
from a2a_core.tokens import bearer_token

CALL_SCOPE_KEY = "hub.call"
# Deepest nesting of arrays and objects a request body may have.
MAX_NESTING = 200
REALM = 'Bearer realm="a2a-hub"'
_REST = re.compile(r"^/a2a(/[^/]+)?/rest(/|$)")
_AGENT = re.compile(r"^/a2a/([^/]+)(/|$)")


def is_rest(path: str) -> bool:
    return bool(_REST.match(path))


def agent_slug(path: str) -> str | None:
    """The agent addressed by an /a2a/<agent>/... path; None for the hub's own endpoint."""
    match = _AGENT.match(path)
    if match is None or match[1] in RESERVED_SLUGS:
        return None
    return match[1]


async def error_response(
    send: Send,
    path: str,
    error: A2AError,
    *,
    extra_headers: Sequence[tuple[bytes, bytes]] = (),
    request: bytes = b"",
    rest: bool | None = None,
) -> None:
    """Answer with `error` in the form of the binding `path` belongs to (`rest` True: a
    `google.rpc.Status` whatever the path); on JSON-RPC, with the id of the `request` body when
    it has a usable one."""
    if rest or (rest is None and is_rest(path)):
        body = build_rest_error_payload(error)
    else:
        body = build_error_response(_request_id(request), error)
    data = json.dumps(body).encode()
    content_type = b"application/json"
    headers = [(b"content-type", content_type), (b"content-length", str(len(data)).encode())]
    await send(
        {
            "type": "http.response.start",
            "status": http_status(error),
            "headers": [*headers, *extra_headers],
        }
    )
    await send({"type": "http.response.body", "body": data})


async def read_body(receive: Receive, limit: int) -> tuple[bytes, bool]:
    """Read the whole request body, stopping once it passes `limit` bytes."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b"".join(chunks), False
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return b"", True
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks), False


def resolve(token: str, slug: str | None) -> tuple[Agent | None, Agent | None]:
    """(the agent the token belongs to, the agent registered as `slug`); None when unknown."""
    caller = agent_cache.agent_by_token(token) if token else None
    target = agent_cache.agent_by_slug(slug) if slug else None
    return caller, target


async def authenticate(token: str | None, slug: str | None) -> tuple[Agent | None, Agent | None]:
    """(the calling agent, the agent registered as `slug`), None when unknown: the caller by
    its hub token or, for a JWT, by its identity provider (`a2a_core.protocol.identity`).
    Raises the A2A error to answer a refused JWT with, or HeaderTooLargeError for a token over
    HUB_MAX_AUTHORIZATION_BYTES (looked up nowhere)."""
    if token and len(token) > settings.HUB_MAX_AUTHORIZATION_BYTES:
        raise _header_too_large(len(token))
    caller = agent_cache.cached(token=token) if token else None
    target = agent_cache.cached(slug=slug) if slug else None
    if token and looks_like_jwt(token):
        caller = await agent_for_jwt(token)
        if slug and target is None:
            target = await db(agent_cache.agent_by_slug, slug)
    elif caller is None or (slug and target is None):
        caller, target = await db(resolve, token or "", slug)
    return caller, target


async def refuse_oversized_headers(scope: Scope, send: Send) -> bool:
    """Answer 431 (HeaderTooLargeError, in the form of the binding the path belongs to; a
    `google.rpc.Status` off the A2A endpoints) to a request whose `Authorization` header is
    over HUB_MAX_AUTHORIZATION_BYTES, before anything reads it; True when it did."""
    limit = settings.HUB_MAX_AUTHORIZATION_BYTES
    for name, value in scope["headers"]:
        if len(value) > limit and name.lower() == b"authorization":
            path: str = scope["path"]
            a2a = path.startswith("/a2a/") or path == "/a2a"
            await error_response(
                send, path, _header_too_large(len(value)), rest=None if a2a else True
            )
            return True
    return False


def _header_too_large(size: int) -> HeaderTooLargeError:
    limit = settings.HUB_MAX_AUTHORIZATION_BYTES
    return HeaderTooLargeError(
        f"the Authorization header is {size:,} bytes; this hub reads at most {limit:,} "
        "(HUB_MAX_AUTHORIZATION_BYTES)",
        {"limitBytes": limit},
    )


def refusal_headers(error: A2AError) -> list[tuple[bytes, bytes]]:
    """The WWW-Authenticate header a refused credential is answered with (RFC 6750)."""
    if isinstance(error, UnauthenticatedError):
        return [(b"www-authenticate", f'{REALM}, error="invalid_token"'.encode())]
    return []


def unauthenticated(token: str | None) -> tuple[A2AError, list[tuple[bytes, bytes]]]:
    """The 401 error for a missing or an unknown token, with its WWW-Authenticate header."""
    if not token:
        return (
            UnauthenticatedError(
                "send 'Authorization: Bearer <token>'; the hub issues a token to each agent "
                "when it is registered"
            ),
            [(b"www-authenticate", REALM.encode())],
        )
    return (
        UnauthenticatedError("the bearer token is unknown or was rotated"),
        [(b"www-authenticate", f'{REALM}, error="invalid_token"'.encode())],
    )


def rest_refusal(error: A2AError, headers: list[tuple[bytes, bytes]] | None = None) -> Response:
    """An error in the REST binding's form (`google.rpc.Status`), for the hub's own routes."""
    return JSONResponse(
        build_rest_error_payload(error),
        status_code=http_status(error),
        headers={k.decode(): v.decode() for k, v in headers or []},
    )


async def rest_caller(request: Request) -> Agent | Response:
    """The agent calling one of the hub's own REST routes (its bearer token or a trusted
    issuer's JWT, as for its calls), or the refusal to answer it with."""
    token = bearer_token(request.headers)
    try:
        caller, _ = await authenticate(token, None)
    except A2AError as refused:
        return rest_refusal(refused, refusal_headers(refused))
    if caller is None:
        return rest_refusal(*unauthenticated(token))
    return caller


class AgentGate:
    """ASGI middleware for /a2a/ (the hub) and /a2a/<agent>/ (an agent through the hub)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if path.endswith("/.well-known/agent-card.json"):
            await self.app(scope, receive, send)  # cards are public, as A2A discovery expects
            return
        headers = Headers(scope=scope)
        limit = settings.HUB_MAX_BODY_BYTES
        declared = headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > limit:
            await error_response(send, path, _too_large(int(declared), limit))
            return
        body, too_large = await read_body(receive, limit)
        if too_large:
            await error_response(send, path, _too_large(None, limit))
            return
        if body and _nested_too_deep(body):
            await error_response(
                send,
                path,
                InvalidRequestError(
                    message=f"the request body nests deeper than {MAX_NESTING} levels"
                ),
            )
            return
        if body and not _utf8_json_text(body):
            await error_response(
                send,
                path,
                JSONParseError(
                    message="the request body is not JSON text in UTF-8 (RFC 8259 requires UTF-8)"
                ),
            )
            return

        if _has_lone_surrogate(body):
            await error_response(
                send,
                path,
                InvalidRequestError(
                    message="the request holds a lone UTF-16 surrogate escape (such as "
                    "\\ud800): ids and text sent to the hub must be Unicode text"
                ),
                request=body,
            )
            return
        if "\x00" in path or b"%00" in scope.get("query_string", b"") or _has_nul(body):
            # Nothing the hub stores may hold U+0000 (PostgreSQL text and jsonb refuse it).
            await error_response(
                send,
                path,
                InvalidParamsError(
                    message="the request contains a NUL character (U+0000); ids and text "
                    "sent to the hub may not"
                ),
                request=body,
            )
            return

        token = bearer_token(headers)
        slug = agent_slug(path)
        try:
            caller, target = await authenticate(token, slug)
        except A2AError as refused:
            await error_response(
                send, path, refused, extra_headers=refusal_headers(refused), request=body
            )
            return
        if caller is None:
            error, extra = unauthenticated(token)
            await error_response(send, path, error, extra_headers=extra, request=body)
            return
        if slug and target is None:
            await error_response(
                send,
                path,
                AgentNotFoundError(f"no agent {slug!r} is registered at this hub", {"agent": slug}),
                request=body,
            )
            return
        if not caller.has_scope(AgentScope.CALL):
            await error_response(
                send,
                path,
                PermissionDeniedError(
                    f"the token of {caller.slug} lacks the a2a:call scope",
                    {"agent": caller.slug, "missingScope": AgentScope.CALL.value},
                ),
                request=body,
            )
            return

        call = Call(
            caller=caller, target=target, headers={k.lower(): v for k, v in headers.items()}
        )
        scope[CALL_SCOPE_KEY] = call
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start" and call.response_headers:
                extra = [(k.lower().encode(), v.encode()) for k, v in call.response_headers.items()]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        with tracing.request(
            caller=caller.slug, target=target.slug if target else "", headers=call.headers
        ):
            await self.app(scope, replay, send_with_headers)


def _nested_too_deep(body: bytes) -> bool:
    """Whether brackets nest deeper than MAX_NESTING (the JSON decoder would recurse until
    it fails). Counting the brackets first keeps the common case to two fast scans."""
    if body.count(b"[") + body.count(b"{") <= MAX_NESTING:
        return False
    depth = 0
    in_string = escaped = False
    for byte in body:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > MAX_NESTING:
                return True
        elif byte in (0x5D, 0x7D):  # ] }
            depth -= 1
    return False


def _has_nul(body: bytes) -> bool:
    """Whether the JSON body holds U+0000, escaped in a string or a key (a raw NUL byte is
    not JSON at all: the dispatcher refuses it as a parse error)."""
    if b"\\u0000" not in body:
        return False
    try:  # the escape may be text that merely looks like one ("\\u0000")
        return holds_nul(json.loads(body))
    except (ValueError, RecursionError):
        return False  # not JSON: the dispatcher says so


# A JSON escape of a UTF-16 surrogate, high (D800-DBFF) or low (DC00-DFFF).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _has_lone_surrogate(body: bytes) -> bool:
    """Whether the JSON body holds a lone surrogate (`"\\ud800"`); only a body with a
    surrogate escape (an emoji's pair, say) is decoded to look."""
    if not _SURROGATE_ESCAPE.search(body):
        return False
    try:
        return holds_lone_surrogate(json.loads(body))
    except (ValueError, RecursionError):
        return False  # not JSON: the dispatcher says so


def _request_id(body: bytes) -> str | int | None:
    """The JSON-RPC id of a request body, when it is one a reply can carry (a string of
    Unicode text or an integer); None otherwise, as JSON-RPC says for an unreadable id."""
    try:
        request = json.loads(body) if body else None
    except (ValueError, RecursionError):
        return None
    request_id = request.get("id") if isinstance(request, dict) else None
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        return None
    if isinstance(request_id, str) and holds_lone_surrogate(request_id):
        return None
    return request_id


def _utf8_json_text(body: bytes) -> bool:
    """Whether `body` can be JSON text at all: UTF-8, and without the NUL bytes a UTF-16 or
    UTF-32 body starts with (the JSON decoder would guess those encodings and fail)."""
    if b"\x00" in body[:4]:
        return False
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _too_large(size: int | None, limit: int) -> PayloadTooLargeError:
    said = f"{size:,} bytes" if size is not None else "more than that"
    return PayloadTooLargeError(
        f"the request body is {said}; this hub accepts at most {limit:,} bytes (HUB_MAX_BODY_BYTES)",
        {"limitBytes": limit},
    )


def call_from(scope: dict[str, Any]) -> Call | None:
    call = scope.get(CALL_SCOPE_KEY)
    return call if isinstance(call, Call) else None
