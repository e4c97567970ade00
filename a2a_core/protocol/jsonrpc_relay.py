"""The JSON-RPC endpoint: SendMessage relayed as JSON, everything else the a2a-sdk's dispatcher.

A plain A2A 1.0 `SendMessage` (`A2A-Version: 1.0`, a JSON-RPC 2.0 request whose params are
a SendMessageRequest in the plain ProtoJSON `a2a_core.schemas.protojson` reads, with every
field the A2A types require) is parsed once, checked once against the A2A types, and served
from those dicts: the hub records and forwards them, and answers with the ProtoJSON of what
it recorded or what the agent said, never through protobuf. That is what the SDK's
dispatcher answers for the same request, by construction (`canonical` is the SDK's own round
trip; tests/a2a_core/test_protojson.py). Any other request, including every one the SDK
would refuse, is the SDK's dispatcher's, which answers it as before, from the same body.
"""

from __future__ import annotations

import logging

from a2a.server.jsonrpc_models import InternalError
from a2a.server.request_handlers.response_helpers import build_error_response
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types.a2a_pb2 import SendMessageRequest
from a2a.utils.constants import PROTOCOL_VERSION_1_0, VERSION_HEADER
from a2a.utils.errors import A2AError
from jsonrpc.jsonrpc2 import JSONRPC20Response
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from a2a_core import timeline
from a2a_core.delivery.call import MessageSend
from a2a_core.protocol.handler import HubRequestHandler
from a2a_core.schemas.protojson import canonical

logger = logging.getLogger("a2a.server.routes.jsonrpc_dispatcher")

_REQUEST_KEYS = frozenset({"jsonrpc", "method", "params", "id"})


class HubJsonRpcDispatcher(JsonRpcDispatcher):
    """The SDK's JSON-RPC dispatcher, with SendMessage relayed (see the module's docstring)."""

    request_handler: HubRequestHandler

    async def handle_requests(self, request: Request) -> Response:
        relayed = await self._relay(request)
        if relayed is not None:
            return relayed
        return await super().handle_requests(request)

    async def _relay(self, request: Request) -> Response | None:
        """The answer to a plain SendMessage; None for any other request."""
        if request.headers.get(VERSION_HEADER) != PROTOCOL_VERSION_1_0:
            return None
        try:
            body = await request.json()  # kept by the request: the SDK reads it from there
        except ValueError:
            return None
        if (
            type(body) is not dict
            or body.keys() - _REQUEST_KEYS
            or body.get("jsonrpc") != "2.0"
            or body.get("method") != "SendMessage"
            or type(body.get("id")) not in (str, int)
        ):
            return None
        params = canonical(body.get("params"), SendMessageRequest, required=True)
        if params is None:
            return None
        timeline.mark("handler")
        request_id = body["id"]
        try:
            context = self._context_builder.build(request)
            context.tenant = params.get("tenant", "")
            context.state["method"] = "SendMessage"
            context.state["request_id"] = request_id
            try:
                answer = await self.request_handler.send_message(MessageSend(params), context)
                result = JSONRPC20Response(result=answer.response(), _id=request_id).data
            except A2AError as exc:
                result = build_error_response(request_id, exc)
            return self._create_response(context, result)
        except A2AError as exc:
            return self._generate_error_response(request_id, exc)
        except Exception as exc:
            logger.exception("Unhandled exception")
            return self._generate_error_response(request_id, InternalError(message=str(exc)))


def jsonrpc_routes(
    handler: HubRequestHandler, rpc_url: str, context_builder: object
) -> list[Route]:
    """As the SDK's `create_jsonrpc_routes` (0.3 methods too), with the relaying dispatcher."""
    dispatcher = HubJsonRpcDispatcher(
        request_handler=handler,
        context_builder=context_builder,  # type: ignore[arg-type]
        enable_v0_3_compat=True,
    )
    return [Route(path=rpc_url, endpoint=dispatcher.handle_requests, methods=["POST"])]
