"""The a2a-sdk's JSON-RPC transport with its unary calls posted by aiohttp."""

from __future__ import annotations

import json
from typing import Any
from uuid import uuid4

import aiohttp
import httpx
from a2a.client import ClientCallContext
from a2a.client.errors import A2AClientError, A2AClientTimeoutError
from a2a.client.transports.jsonrpc import JsonRpcTransport
from a2a.types.a2a_pb2 import AgentCard, SendMessageResponse
from a2a.utils.proto_utils import parse_lenient
from google.protobuf.json_format import MessageToDict

from a2a_core.delivery.agent_errors import last_result
from a2a_core.schemas.protojson import canonical

_TRANSPORT_HEADERS = frozenset({"accept-encoding", "connection", "user-agent"})


class AiohttpJsonRpcTransport(JsonRpcTransport):
    """The SDK's JSON-RPC transport, its unary calls posted with aiohttp directly.

    The SDK builds and checks every request and answer as before; only the HTTP exchange
    skips httpx's request and response models, cookie jar and redirect handling (a
    forwarded call needs none of them): about an eighth of the hub's CPU per forwarded call
    (bench/throughput.py). Streams still go through httpx."""

    def __init__(
        self, session: aiohttp.ClientSession, http: httpx.AsyncClient, card: AgentCard, url: str
    ) -> None:
        super().__init__(http, card, url, is_shared_httpx=True)
        self._session = session
        # What the SDK's client factory put on the shared client (A2A-Version); aiohttp sets
        # the transport's own (Accept-Encoding: only what it can decode, Connection, User-Agent).
        self._headers = {
            name: value
            for name, value in http.headers.items()
            if name.lower() not in _TRANSPORT_HEADERS
        }
        self._headers["Content-Type"] = "application/json"
        # An API key the agent takes in the query (the agent's own httpx client carries it).
        self._params = dict(http.params.multi_items())

    async def _send_request(
        self, payload: dict[str, Any], context: ClientCallContext | None = None
    ) -> dict[str, Any]:
        if self._session.closed:
            raise A2AClientError("HTTP client is closed")
        headers = dict(self._headers)
        timeout = None
        if context is not None:
            headers.update(context.service_parameters or {})
            if context.timeout is not None:
                timeout = aiohttp.ClientTimeout(total=context.timeout)
        try:
            async with self._session.post(
                self.url,
                data=json.dumps(payload).encode(),
                headers=headers,
                params=self._params or None,
                timeout=timeout,
                allow_redirects=False,
            ) as response:
                body = await response.read()
        except TimeoutError as exc:
            raise A2AClientTimeoutError("Client Request timed out") from exc
        except aiohttp.ClientError as exc:
            raise A2AClientError(f"Network communication error: {exc}") from exc
        if not 200 <= response.status < 300:
            raise A2AClientError(f"HTTP Error {response.status}: {response.reason}")
        try:
            return self._check_jsonrpc_response(json.loads(body))
        except ValueError as exc:
            raise A2AClientError(f"JSON Decode Error: {exc}") from exc

    async def relay_message(
        self, params: dict[str, Any], context: ClientCallContext | None = None
    ) -> dict[str, Any]:
        """SendMessage (not streaming) as the SDK's `send_message` posts it, with `params`
        the ProtoJSON SendMessageRequest the hub built; the agent's answer as the ProtoJSON of
        a StreamResponse (`{"task": ...}` or `{"message": ...}`), exactly what the SDK's client
        and `MessageToDict` make of it, read without protobuf when it is plain
        (`a2a_core.schemas.protojson`), and refused as the SDK refuses it otherwise."""
        payload = {"method": "SendMessage", "params": params, "id": str(uuid4()), "jsonrpc": "2.0"}
        result = (await self._send_request(payload, context))["result"]
        answer = canonical(result, SendMessageResponse)
        if answer is None:
            answer = MessageToDict(parse_lenient(result, SendMessageResponse()))
        if "task" not in answer and "message" not in answer:
            raise ValueError("Response has neither task nor message")
        return answer

    def _check_jsonrpc_response(self, response_data: Any) -> dict[str, Any]:
        # Unary answers and stream events alike pass here before the SDK parses their result.
        checked = super()._check_jsonrpc_response(response_data)
        last_result.set(checked.get("result"))
        return checked


# The result of the JSON-RPC answer the SDK is parsing in this task: an answer that is not
