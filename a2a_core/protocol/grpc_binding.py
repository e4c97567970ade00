"""The gRPC binding: every registered agent, and the hub itself, over A2A's gRPC service.

The a2a-sdk's `GrpcHandler` serves the service with the hub's `HubRequestHandler`, the one
behind JSON-RPC and REST: policy, limits, recording, events and forwarding are the same. What
the HTTP gate does (`a2a_core.protocol.gate`) is done here before each call:
- the agent addressed is the request's `tenant` (A2A 1.0 puts one in every gRPC request; the
  hub's cards give each agent's slug as its gRPC interface's tenant, and the SDK's client
  sends it); no tenant is the hub's own endpoint, like /a2a/;
- the caller is the bearer token of the `authorization` metadata: a hub token, or a JWT from
  an identity provider the hub trusts (`a2a_core.protocol.identity`);
- a refusal is a gRPC status with `google.rpc.ErrorInfo` (reason, domain, metadata), as the
  A2A spec maps errors to gRPC, with the same message as over HTTP.

Junk gets the status that says why, and costs no other caller anything: a frame that is not
the method's request message (undecodable bytes, a field of the wrong wire type, bad UTF-8)
is INVALID_ARGUMENT naming the message type and what is wrong with it (each method's request
is read here, not by gRPC's deserializer, which would answer UNKNOWN and log a traceback); a
tenant that cannot be an agent's name is INVALID_ARGUMENT before anything is looked up; a
request missing a required field is INVALID_ARGUMENT naming the field. Oversized frames and
metadata are RESOURCE_EXHAUSTED from gRPC itself, an unknown method UNIMPLEMENTED. What a
caller gets wrong is logged at most as one WARNING line, rate-limited
(`a2a_core.logging.warn_limited`).

Each server process serves gRPC on HUB_GRPC_PORT (several processes share it with
SO_REUSEPORT, as they share the HTTP port).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Awaitable, Callable
from contextvars import ContextVar
from typing import Any, TypeVar
from urllib.parse import urlsplit

import grpc
import grpc.aio
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import grpc_handler
from a2a.server.request_handlers.grpc_handler import (
    DefaultGrpcServerCallContextBuilder,
    GrpcHandler,
)
from a2a.types import a2a_pb2
from a2a.utils.constants import VERSION_HEADER
from a2a.utils.errors import (
    A2A_ERROR_REASONS,
    A2AError,
    InvalidParamsError,
    InvalidRequestError,
)
from a2a.utils.errors import VersionNotSupportedError as SdkVersionNotSupported
from a2a.utils.grpc_status import status_to_grpc
from django.conf import settings
from google.protobuf import any_pb2, message, message_factory
from google.protobuf.json_format import MessageToDict
from google.rpc import error_details_pb2, status_pb2

from a2a_core.delivery.call import Call
from a2a_core.logging import get_logger, warn_limited
from a2a_core.models import Scope as AgentScope
from a2a_core.protocol.errors import (
    HUB_ERRORS,
    AgentNotFoundError,
    HubA2AError,
    PayloadTooLargeError,
    PermissionDeniedError,
)
from a2a_core.protocol.gate import authenticate, unauthenticated
from a2a_core.protocol.handler import CALL_KEY, HubRequestHandler
from a2a_core.protocol.versions import a2a_major
from a2a_core.schemas.a2a import holds_nul
from a2a_core.services.agents import SLUG_RE
from a2a_core.tokens import bearer_token

log = get_logger("grpc")

T = TypeVar("T")
ERROR_DOMAIN = "a2a-protocol.org"

# The call admitted for the request being served in this task (set before the SDK builds its
# context, which it does synchronously from the gRPC context alone).
_admitted: ContextVar[Call | None] = ContextVar("grpc_call", default=None)


def _register_errors() -> None:
    """Give the hub's errors the gRPC status the A2A spec maps their kind to."""
    for cls, (_, _, status, _) in HUB_ERRORS.items():
        grpc_handler._ERROR_CODE_MAP[cls] = grpc.StatusCode[status]


_register_errors()


def _metadata(context: grpc.aio.ServicerContext) -> dict[str, str]:
    """The call's text metadata, lower-cased names (binary `-bin` entries left out)."""
    found: dict[str, str] = {}
    for key, value in context.invocation_metadata() or ():
        if isinstance(value, str):
            found[key.lower()] = value
    return found


async def admit(request: message.Message, context: grpc.aio.ServicerContext) -> Call:
    """Who calls whom, as the HTTP gate decides it; raises the A2A error that refuses it."""
    metadata = _metadata(context)
    version = metadata.get(VERSION_HEADER.lower(), "").strip()
    # VersionNotSupportedError is FAILED_PRECONDITION over gRPC: A2A 1.0.1's mapping (section
    # 5.4), which replaced 1.0.0's UNIMPLEMENTED; the a2a-sdk 1.x maps it so too.
    if version and a2a_major(version) != 1:
        raise SdkVersionNotSupported(
            f"A2A-Version {_shown(version)} is not supported over gRPC: this hub's gRPC service "
            "speaks A2A 1.0 (send 'a2a-version: 1.0')"
        )
    token = bearer_token(metadata)
    slug = getattr(request, "tenant", "") or None
    if slug is not None and not SLUG_RE.match(slug):
        warn_limited(log, "grpc-tenant", "gRPC: refused a request whose tenant is no agent's name")
        raise InvalidParamsError(
            message=f"the request's tenant {_shown(slug)} cannot name an agent at this hub: an "
            "agent's name is 1-64 lowercase letters, digits, '-' or '_' (the tenant of the "
            "agent's gRPC interface in its card); leave it empty for the hub's own endpoint"
        )
    # A hub token or a trusted identity provider's JWT, as over HTTP.
    caller, target = await authenticate(token, slug)
    if caller is None:
        raise unauthenticated(token)[0]
    if slug and target is None:
        raise AgentNotFoundError(f"no agent {slug!r} is registered at this hub", {"agent": slug})
    if not caller.has_scope(AgentScope.CALL):
        raise PermissionDeniedError(
            f"the token of {caller.slug} lacks the a2a:call scope",
            {"agent": caller.slug, "missingScope": AgentScope.CALL.value},
        )
    size, limit = request.ByteSize(), settings.HUB_MAX_BODY_BYTES
    if size > limit:
        raise PayloadTooLargeError(
            f"the request is {size:,} bytes; this hub accepts at most {limit:,} bytes "
            "(HUB_MAX_BODY_BYTES)",
            {"limitBytes": limit},
        )
    if holds_nul(MessageToDict(request)):
        # Nothing the hub stores may hold U+0000 (PostgreSQL text and jsonb refuse it).
        raise InvalidParamsError(
            message="the request contains a NUL character (U+0000); ids and text sent to "
            "the hub may not"
        )
    return Call(caller=caller, target=target, headers=metadata)


def _shown(text: str, limit: int = 40) -> str:
    """`text` quoted for an error message, cut at `limit` characters (a status message travels
    in metadata, whose size the caller's gRPC limits)."""
    return repr(text[:limit]) + ("..." if len(text) > limit else "")


class HubGrpcContextBuilder(DefaultGrpcServerCallContextBuilder):
    """Puts the admitted call (who calls whom) into the SDK's call context."""

    def build(self, context: grpc.aio.ServicerContext) -> ServerCallContext:
        built = super().build(context)
        built.state[CALL_KEY] = _admitted.get()
        return built


class HubGrpcHandler(GrpcHandler):
    """The SDK's gRPC servicer, each call admitted first; refusals carry ErrorInfo metadata
    (the same data a JSON-RPC error carries) and a refusal's Retry-After as metadata."""

    def __init__(self) -> None:
        super().__init__(HubRequestHandler(), HubGrpcContextBuilder())

    async def _handle_unary(
        self,
        request: message.Message,
        context: grpc.aio.ServicerContext,
        handler_func: Callable[[ServerCallContext], Awaitable[T]],
        default_response: T,
    ) -> T:
        try:
            _admitted.set(await admit(request, context))
        except A2AError as exc:
            await self.abort_context(exc, context)
            return default_response
        result = await super()._handle_unary(request, context, handler_func, default_response)
        _answer_metadata(context)
        return result

    async def _handle_stream(
        self,
        request: message.Message,
        context: grpc.aio.ServicerContext,
        handler_func: Callable[[ServerCallContext], AsyncIterable[T]],
    ) -> AsyncIterable[T]:
        try:
            _admitted.set(await admit(request, context))
        except A2AError as exc:
            await self.abort_context(exc, context)
            return
        async for item in super()._handle_stream(request, context, handler_func):
            yield item
        _answer_metadata(context)

    async def abort_context(self, error: A2AError, context: grpc.aio.ServicerContext) -> None:
        _answer_metadata(context)
        if not isinstance(error, HubA2AError):
            await super().abort_context(_with_fields(error), context)
            return
        info = error_details_pb2.ErrorInfo(
            reason=A2A_ERROR_REASONS.get(type(error), "UNKNOWN_ERROR"),
            domain=ERROR_DOMAIN,
            metadata={str(k): str(v) for k, v in (error.data or {}).items()},
        )
        code = grpc_handler._ERROR_CODE_MAP[type(error)]
        status = status_pb2.Status(code=code.value[0], message=error.message)
        detail = any_pb2.Any()
        detail.Pack(info)
        status.details.append(detail)
        rich = status_to_grpc(status)
        trailing = [(str(k), v) for k, v in context.trailing_metadata() or ()]
        context.set_trailing_metadata((*trailing, *rich.trailing_metadata))
        await context.abort(rich.code, rich.details)


def _with_fields(error: A2AError) -> A2AError:
    """A validation error whose message names the fields at fault (the SDK's says only
    "Validation failed"; its BadRequest detail, kept, lists them too). A message that already
    says what each problem is (the hub's own) is kept as it is."""
    problems = (error.data or {}).get("errors") if isinstance(error.data, dict) else None
    if not isinstance(error, InvalidParamsError) or not problems:
        return error
    said = [p.get("message", "") for p in problems if isinstance(p, dict)]
    if all(text and text in error.message for text in said):
        return error
    fields = "; ".join(
        f"{p.get('field') or 'request'}: {p.get('message', '')}".rstrip(": ")
        for p in problems
        if isinstance(p, dict)
    )
    return InvalidParamsError(message=f"{error.message}: {fields}", data=error.data)


def _answer_metadata(context: grpc.aio.ServicerContext) -> None:
    """What the hub adds to an HTTP answer's headers (Retry-After on a refusal), as trailing
    metadata of the gRPC call."""
    call = _admitted.get()
    if call is None or not call.response_headers:
        return
    trailing = [(str(k), v) for k, v in context.trailing_metadata() or ()]
    extra = [(k.lower(), v) for k, v in call.response_headers.items()]
    context.set_trailing_metadata((*trailing, *extra))
    call.response_headers.clear()


_SERVICE = a2a_pb2.DESCRIPTOR.services_by_name["A2AService"]


def service_handlers(servicer: HubGrpcHandler) -> dict[str, grpc.RpcMethodHandler]:
    """Every method of A2A's gRPC service, served by `servicer`, each request read here from
    the frame's bytes (`_read`) rather than by gRPC's deserializer."""
    handlers: dict[str, grpc.RpcMethodHandler] = {}
    for method in _SERVICE.methods:
        request_type = message_factory.GetMessageClass(method.input_type)
        serialize = message_factory.GetMessageClass(method.output_type).SerializeToString
        serve = getattr(servicer, method.name)
        if method.server_streaming:
            handlers[method.name] = grpc.unary_stream_rpc_method_handler(
                _streaming(servicer, serve, request_type), response_serializer=serialize
            )
        else:
            handlers[method.name] = grpc.unary_unary_rpc_method_handler(
                _unary(servicer, serve, request_type), response_serializer=serialize
            )
    return handlers


async def _read(
    servicer: HubGrpcHandler,
    raw: bytes,
    request_type: type[message.Message],
    context: grpc.aio.ServicerContext,
) -> message.Message:
    """The request in `raw`; a frame that is not one is refused with INVALID_ARGUMENT."""
    try:
        return request_type.FromString(raw)
    except message.DecodeError as exc:
        name = request_type.DESCRIPTOR.full_name
        warn_limited(log, "grpc-undecodable", f"gRPC: refused a frame that is not a {name}")
        # protobuf's text names the type too: "Error parsing message with type '...': why".
        why = str(exc).rpartition("': ")[2] or "not protobuf"
        error = InvalidRequestError(message=f"the request is not a valid {name}: {why}")
        await servicer.abort_context(error, context)
        raise  # not reached: aborting raises


def _unary(
    servicer: HubGrpcHandler,
    serve: Callable[[Any, grpc.aio.ServicerContext], Awaitable[Any]],
    request_type: type[message.Message],
) -> Callable[[bytes, grpc.aio.ServicerContext], Awaitable[Any]]:
    async def behaviour(raw: bytes, context: grpc.aio.ServicerContext) -> Any:
        return await serve(await _read(servicer, raw, request_type, context), context)

    return behaviour


def _streaming(
    servicer: HubGrpcHandler,
    serve: Callable[[Any, grpc.aio.ServicerContext], AsyncIterable[Any]],
    request_type: type[message.Message],
) -> Callable[[bytes, grpc.aio.ServicerContext], AsyncIterable[Any]]:
    async def behaviour(raw: bytes, context: grpc.aio.ServicerContext) -> AsyncIterable[Any]:
        async for item in serve(await _read(servicer, raw, request_type, context), context):
            yield item

    return behaviour


def address(base: str) -> str:
    """The gRPC address cards give (host:port): HUB_GRPC_PUBLIC_ADDRESS, else the host callers
    reached the hub's HTTP side at, with HUB_GRPC_PORT."""
    if settings.HUB_GRPC_PUBLIC_ADDRESS:
        return str(settings.HUB_GRPC_PUBLIC_ADDRESS)
    host = urlsplit(base).hostname or "127.0.0.1"
    host = f"[{host}]" if ":" in host else host
    return f"{host}:{settings.HUB_GRPC_PORT}"


def enabled() -> bool:
    return bool(settings.HUB_GRPC_PORT)


_server: grpc.aio.Server | None = None


async def start(*, host: str | None = None, port: int | None = None) -> int:
    """Serve gRPC in this process on `host`:`port` (default HUB_GRPC_HOST and HUB_GRPC_PORT);
    returns the port bound. Idempotent."""
    global _server
    if _server is not None:
        return int(settings.HUB_GRPC_PORT)
    bind_host = host or settings.HUB_GRPC_HOST
    bind_port = settings.HUB_GRPC_PORT if port is None else port
    target = f"[{bind_host}]:{bind_port}" if ":" in bind_host else f"{bind_host}:{bind_port}"
    options: list[tuple[str, Any]] = [
        ("grpc.so_reuseport", 1),
        # gRPC refuses what is far over the hub's limit before reading it; `admit` refuses the
        # rest with the hub's own error (PAYLOAD_TOO_LARGE, as over HTTP).
        ("grpc.max_receive_message_length", 2 * settings.HUB_MAX_BODY_BYTES),
    ]
    server = grpc.aio.server(options=options)
    handlers = service_handlers(HubGrpcHandler())
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(_SERVICE.full_name, handlers),)
    )
    server.add_registered_method_handlers(_SERVICE.full_name, handlers)
    bound = server.add_insecure_port(target)
    if not bound:
        raise RuntimeError(f"could not listen for gRPC on {target}")
    await server.start()
    _server = server
    log.info("serving gRPC on %s", target)
    return bound


async def stop(grace: float = 2.0) -> None:
    global _server
    if _server is not None:
        server, _server = _server, None
        await server.stop(grace)
