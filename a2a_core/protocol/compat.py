"""The A2A 0.3 HTTP+JSON routes (`/v1/...`), answering a stream's opening error as an error.

The a2a-sdk's 0.3 REST adapter starts the SSE response (200) before its handler reads the
body, so a malformed body, invalid params or a refusal of the policy escapes after the
headers went out: the server cuts the connection and the caller never sees why. The SDK's 1.0
dispatcher reads the first event before it answers; this adapter does the same for 0.3, so
such an error is the binding's own error response (a `google.rpc.Status` with its status).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterable, AsyncIterator, Callable
from typing import Any

from a2a.compat.v0_3.rest_adapter import REST03Adapter
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.server.routes.common import ServerCallContextBuilder, create_event_source_response
from a2a.utils import json_utils
from a2a.utils.error_handlers import build_rest_error_payload, rest_stream_error_handler
from a2a.utils.errors import InvalidRequestError
from sse_starlette.sse import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.routing import BaseRoute, Route

logger = logging.getLogger(__name__)


class HubREST03Adapter(REST03Adapter):
    @rest_stream_error_handler
    async def _handle_streaming_request(
        self,
        method: Callable[[Request, ServerCallContext], AsyncIterable[Any]],
        request: Request,
    ) -> EventSourceResponse:
        try:
            await request.body()  # read now: the stream may not read it once it has started
        except (ValueError, RuntimeError, OSError) as e:
            raise InvalidRequestError(message=f"Failed to pre-consume request body: {e}") from e
        stream = aiter(method(request, self._context_builder.build(request)))
        try:
            first = await anext(stream)
        except StopAsyncIteration:
            return create_event_source_response(
                iter([]), shutdown_grace_period=self._shutdown_grace_period
            )

        async def events() -> AsyncIterator[ServerSentEvent]:
            yield ServerSentEvent(data=json_utils.dumps(first))
            try:
                async for item in stream:
                    yield ServerSentEvent(data=json_utils.dumps(item))
            except Exception as e:
                logger.exception("Error during REST SSE stream")
                yield ServerSentEvent(
                    data=json_utils.dumps(build_rest_error_payload(e)), event="error"
                )

        return create_event_source_response(
            events(), shutdown_grace_period=self._shutdown_grace_period
        )


def rest_v03_routes(handler: RequestHandler, builder: ServerCallContextBuilder) -> list[BaseRoute]:
    """The 0.3 REST routes `create_rest_routes(enable_v0_3_compat=True)` would add; they go
    before the 1.0 routes, whose `/{tenant}/...` would otherwise take `/v1/...`."""
    adapter = HubREST03Adapter(http_handler=handler, context_builder=builder)
    return [
        Route(path, endpoint=endpoint, methods=[verb])
        for (path, verb), endpoint in adapter.routes().items()
    ]
