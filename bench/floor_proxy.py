"""The least any A2A hub built on the a2a-sdk does per call, for benches: a bare proxy.

    python bench/floor_proxy.py PORT AGENT_PORT

An a2a-sdk JSON-RPC server whose SendMessage handler forwards the request to the agent on
AGENT_PORT with the a2a-sdk client (over the hub's own aiohttp transport, as the hub forwards)
and answers what the agent answered. No authentication, no policy, no database, no events:
what it costs per call is what the SDK's server and client cost, which the hub pays on every
call before it does anything of its own. `bench/throughput.py --floor` measures it beside the
agent directly and the hub.
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncGenerator
from typing import Any, NoReturn

import aiohttp
import httpx
import uvicorn
from a2a.client import Client, ClientCallContext, ClientConfig, ClientFactory
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import RequestHandler, validate_request_params
from a2a.server.routes import create_jsonrpc_routes
from a2a.types.a2a_pb2 import AgentCard, Message, SendMessageRequest, Task
from a2a.utils.constants import TransportProtocol
from a2a.utils.errors import UnsupportedOperationError
from echo_agent import card
from httpx_aiohttp import AiohttpTransport
from starlette.applications import Starlette

from a2a_core.delivery.jsonrpc import AiohttpJsonRpcTransport


class Forward(RequestHandler):
    """SendMessage goes to the agent; everything else is not offered."""

    def __init__(self, agent: AgentCard) -> None:
        self._agent = agent
        self._client: Client | None = None

    def _connect(self) -> Client:
        # Made on the server's loop, on the first call (aiohttp binds to the running loop).
        if self._client is None:
            session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0), cookie_jar=aiohttp.DummyCookieJar()
            )
            http = httpx.AsyncClient(transport=AiohttpTransport(client=session))
            factory = ClientFactory(ClientConfig(streaming=False, httpx_client=http))
            factory.register(
                TransportProtocol.JSONRPC.value,
                lambda card, url, _config: AiohttpJsonRpcTransport(session, http, card, url),
            )
            self._client = factory.create(self._agent)
        return self._client

    @validate_request_params
    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        async for event in self._connect().send_message(
            params, context=ClientCallContext(timeout=30)
        ):
            return event.task if event.HasField("task") else event.message
        raise RuntimeError("the agent answered nothing")

    async def on_message_send_stream(  # type: ignore[override]
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any]:
        _unsupported()
        yield

    async def on_get_task(self, *args: Any, **kwargs: Any) -> NoReturn:  # type: ignore[override]
        _unsupported()

    on_cancel_task = on_list_tasks = on_subscribe_to_task = on_get_task  # type: ignore[assignment]
    on_get_extended_agent_card = on_get_task  # type: ignore[assignment]
    on_create_task_push_notification_config = on_get_task  # type: ignore[assignment]
    on_get_task_push_notification_config = on_get_task  # type: ignore[assignment]
    on_list_task_push_notification_configs = on_get_task  # type: ignore[assignment]
    on_delete_task_push_notification_config = on_get_task  # type: ignore[assignment]


def _unsupported() -> NoReturn:
    raise UnsupportedOperationError(message="the bare proxy forwards SendMessage only")


def app(agent_port: int) -> Starlette:
    return Starlette(routes=create_jsonrpc_routes(Forward(card(agent_port)), "/"))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("agent_port", type=int)
    args = parser.parse_args()
    uvicorn.run(
        app(args.agent_port),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        access_log=False,
    )
