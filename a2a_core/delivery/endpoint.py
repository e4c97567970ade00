"""Forwarding calls to endpoint agents with the official a2a-sdk client."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import grpc
import grpc.aio
import httpx
from a2a.client import ClientCallContext, ClientConfig, ClientFactory
from a2a.client.client import Client
from a2a.client.errors import A2AClientError, A2AClientTimeoutError
from a2a.client.transports.base import ClientTransport
from a2a.compat.v0_3.jsonrpc_transport import CompatJsonRpcTransport
from a2a.compat.v0_3.versions import is_legacy_version
from a2a.types.a2a_pb2 import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    SendMessageRequest,
    SubscribeToTaskRequest,
)
from a2a.utils.constants import TransportProtocol
from a2a.utils.errors import A2AError
from google.protobuf.json_format import MessageToDict, ParseDict
from httpx_aiohttp import AiohttpTransport

from a2a_core.asyncdb import db
from a2a_core.delivery.agent_errors import (
    NOT_A2A,
    AgentFailed,
    AgentRefused,
    AgentTimeout,
    AgentUnreachable,
    NoSlotInTime,
    last_result,
    not_a2a,
)
from a2a_core.delivery.jsonrpc import AiohttpJsonRpcTransport
from a2a_core.delivery.outbound_auth import OutboundAuth, Sent, failed, refusal, scrub
from a2a_core.delivery.slots import Slots, shared_slots
from a2a_core.errors import AgentAuthFailed, HubError, TargetUnavailable
from a2a_core.models import Agent
from a2a_core.schemas.protojson import normalized
from a2a_core.services.credentials import agent_auth_failure_record
from a2a_core.services.policy import incoming_concurrent

# How long a connection to an agent is kept for reuse.
IDLE_CONNECTION_SECONDS = 4.0


def _to_dict(message: Any) -> dict[str, Any]:
    return MessageToDict(message, preserving_proto_field_name=False)


class EndpointForwarder:
    """One per event loop: a pooled HTTP client and an SDK client per agent card."""

    def __init__(self) -> None:
        # aiohttp carries httpx's requests: httpx's own pool re-checks every idle connection
        # on each request and costs more than twice the CPU per call (bench/throughput.py).
        # No cookie jar: a cookie one agent sets must not reach another (cookies ignore ports).
        # Idle connections are dropped before agents' servers usually drop them (uvicorn after
        # 5 s): a call sent on a connection the server is closing fails with "Server
        # disconnected" although the agent is up.
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=500, keepalive_timeout=IDLE_CONNECTION_SECONDS),
            cookie_jar=aiohttp.DummyCookieJar(),
        )
        self._http = httpx.AsyncClient(
            transport=AiohttpTransport(client=self._session), timeout=httpx.Timeout(30.0)
        )
        # Keyed by agent, card and, for an API key sent in the query, the credential.
        self._clients: dict[tuple[int, str, bool, str], Client] = {}
        # gRPC agents: one channel per address, shared by every client for it.
        self._channels: dict[str, grpc.aio.Channel] = {}
        self.slots = Slots(shared=shared_slots())
        self.auth = OutboundAuth(self._http)

    def _client(self, agent: Agent, *, streaming: bool) -> Client:
        params = self.auth.params(agent)
        key = (agent.pk, agent.card_digest, streaming, agent.credential_sealed if params else "")
        client = self._clients.get(key)
        if client is None:
            card = ParseDict(agent.card, AgentCard(), ignore_unknown_fields=True)
            http = self._http
            if params:
                # Its own httpx client (on the shared connections) adds the key to every URL;
                # never closed: closing it would close the shared aiohttp session.
                http = httpx.AsyncClient(
                    transport=AiohttpTransport(client=self._session),
                    timeout=httpx.Timeout(30.0),
                    params=params,
                )
            # Server preference: the first interface in the card the client can speak.
            factory = ClientFactory(
                ClientConfig(
                    # A blocking call must not stream even when the card allows it.
                    streaming=streaming,
                    httpx_client=http,
                    grpc_channel_factory=self._channel,
                    supported_protocol_bindings=[
                        TransportProtocol.JSONRPC.value,
                        TransportProtocol.HTTP_JSON.value,
                        TransportProtocol.GRPC.value,
                    ],
                )
            )
            factory.register(TransportProtocol.JSONRPC.value, self._jsonrpc_transport)
            client = factory.create(card)
            stale = [k for k in self._clients if k[0] == agent.pk and k[1::2] != key[1::2]]
            for old in stale:
                del self._clients[old]
            self._clients[key] = client
        return client

    def _channel(self, url: str) -> grpc.aio.Channel:
        """The channel to a gRPC agent's address: `host:port`, or a URL (`https://` for
        TLS; `grpc://` or `http://` for plaintext)."""
        channel = self._channels.get(url)
        if channel is None:
            parts = urlsplit(url if "://" in url else f"grpc://{url}")
            target = parts.netloc or parts.path
            if parts.scheme in ("https", "grpcs"):
                channel = grpc.aio.secure_channel(target, grpc.ssl_channel_credentials())
            else:
                channel = grpc.aio.insecure_channel(target)
            self._channels[url] = channel
        return channel

    def _jsonrpc_transport(
        self, card: AgentCard, url: str, config: ClientConfig
    ) -> ClientTransport:
        version = next(
            (
                i.protocol_version
                for i in card.supported_interfaces
                if i.url == url and i.protocol_binding == TransportProtocol.JSONRPC.value
            ),
            "",
        )
        http = config.httpx_client or self._http
        if version and is_legacy_version(version):
            return CompatJsonRpcTransport(http, card, url, is_shared_httpx=True)
        return AiohttpJsonRpcTransport(self._session, http, card, url)

    async def send(
        self,
        agent: Agent,
        message: dict[str, Any],
        *,
        streaming: bool,
        headers: dict[str, str],
        wait_seconds: float,
        accepted_output_modes: list[str] | None = None,
        return_immediately: bool = False,
        task_id: str = "",
        metadata: dict[str, Any] | None = None,
    ) -> AsyncGenerator[dict[str, Any]]:
        """Send `message` (ProtoJSON) to the agent (with `metadata` as the request's); yield
        what it answers (StreamResponse, as ProtoJSON).

        To a JSON-RPC agent, a call that does not stream is relayed as JSON: the request the
        hub built, the answer as the agent sent it when protobuf would not change it
        (`AiohttpJsonRpcTransport.relay_message`). Other bindings and streams go through the
        SDK's client.

        Not streaming: one answer (a task or a message), within `wait_seconds` in total.
        Streaming (when the agent's card allows it): its events as they come, each within
        `wait_seconds` of the previous one. Either way, the call first waits for one of the
        agent's slots when all are taken (see `a2a_core.delivery.slots`): that wait counts
        towards the first answer's time. `task_id` (the hub's) lets a cancel withdraw it.
        """
        # What the SDK's client would post for SendMessageRequest(message=..., configuration
        # with these fields, metadata=...): the configuration is always there.
        configuration: dict[str, Any] = {}
        if accepted_output_modes:
            configuration["acceptedOutputModes"] = list(accepted_output_modes)
        if return_immediately:
            configuration["returnImmediately"] = True
        params: dict[str, Any] = {"message": message, "configuration": configuration}
        if metadata:
            params["metadata"] = metadata
        request = normalized(params, SendMessageRequest)
        loop = asyncio.get_running_loop()
        began = loop.time()
        limit = incoming_concurrent(agent.slug)
        slots = self.slots
        try:
            lease = await slots.acquire(agent.pk, agent.slug, limit, task_id, wait_seconds)
        except TimeoutError:
            busy = slots.busy(agent.pk)
            raise NoSlotInTime(
                f"{agent.slug} was busy with {busy} call{'s' * (busy != 1)} (its limit, "
                f"incomingConcurrent: {limit}) and none ended within {wait_seconds:g} s; "
                "this call was not sent"
            ) from None
        # The first answer is due within what is left of the call's time after its wait (the
        # HTTP client's own timeout stays per read: a stream's later events get the full time).
        # An OAuth2 token to fetch first takes from that time too, and never counts as the
        # agent not answering.
        try:
            sent = await self._authorized(agent, headers, wait_seconds - (loop.time() - began))
            wait_first = max(0.0, wait_seconds - (loop.time() - began))
            stream = self._send(
                agent,
                self._client(agent, streaming=streaming),
                request,
                sent,
                wait_seconds,
                streaming=streaming,
            )
            iterator = stream.__aiter__()
            try:
                wait = wait_first
                while True:
                    try:
                        async with asyncio.timeout(wait):
                            event = await anext(iterator)
                    except StopAsyncIteration:
                        return
                    wait = wait_seconds
                    yield event
            except (TimeoutError, A2AClientTimeoutError) as exc:
                raise _timeout_or_unreachable(exc, agent, wait_seconds) from None
            finally:
                await stream.aclose()
        finally:
            slots.release(agent.pk, lease)

    async def _send(
        self,
        agent: Agent,
        client: Client,
        request: dict[str, Any],
        sent: Sent,
        wait_seconds: float,
        *,
        streaming: bool,
    ) -> AsyncGenerator[dict[str, Any]]:
        transport = getattr(client, "_transport", None)
        relay = transport if isinstance(transport, AiohttpJsonRpcTransport) else None
        for attempt in (1, 2):
            if attempt == 2:  # its OAuth2 token was refused: once more with a new one
                sent = await self._authorized(agent, sent.base, wait_seconds)
            last_result.set(None)
            answered = False
            context = self._context(sent.headers, wait_seconds)
            try:
                if relay is not None and not streaming:
                    answer = await relay.relay_message(request, context)
                    answered = True
                    await self._got_through(agent)
                    yield answer
                    return
                async for event in client.send_message(
                    ParseDict(request, SendMessageRequest()), context=context
                ):
                    if not answered:
                        answered = True
                        await self._got_through(agent)
                    yield _to_dict(event)
                return
            except A2AClientTimeoutError:
                raise
            except (A2AClientError, A2AError) as exc:
                await self._failure(agent, exc, sent, retry=attempt == 1 and not answered)
            except NOT_A2A as exc:
                raise not_a2a(exc) from None

    async def cancel(
        self, agent: Agent, remote_task_id: str, *, headers: dict[str, str], wait_seconds: float
    ) -> dict[str, Any]:
        client = self._client(agent, streaming=False)
        request = CancelTaskRequest(id=remote_task_id)
        return await self._unary(
            agent,
            lambda context: client.cancel_task(request, context=context),
            headers,
            wait_seconds,
        )

    async def get_task(
        self, agent: Agent, remote_task_id: str, *, headers: dict[str, str], wait_seconds: float
    ) -> dict[str, Any]:
        """The agent's task as the agent has it now (its ids)."""
        client = self._client(agent, streaming=False)
        request = GetTaskRequest(id=remote_task_id)
        return await self._unary(
            agent, lambda context: client.get_task(request, context=context), headers, wait_seconds
        )

    async def list_tasks(
        self, agent: Agent, context_id: str, *, headers: dict[str, str], wait_seconds: float
    ) -> list[dict[str, Any]]:
        """The agent's tasks in `context_id`, with their history (the agent's ids)."""
        client = self._client(agent, streaming=False)
        request = ListTasksRequest(context_id=context_id, history_length=20, include_artifacts=True)
        listed = await self._unary(
            agent,
            lambda context: client.list_tasks(request, context=context),
            headers,
            wait_seconds,
        )
        return list(listed.get("tasks") or [])

    async def subscribe(
        self, agent: Agent, remote_task_id: str, *, headers: dict[str, str], wait_seconds: float
    ) -> AsyncGenerator[dict[str, Any]]:
        """SubscribeToTask at the agent: the task, then its events (StreamResponse, the agent's
        ids) until it ends; the HTTP client waits at most `wait_seconds` for each."""
        client = self._client(agent, streaming=True)
        request = SubscribeToTaskRequest(id=remote_task_id)
        for attempt in (1, 2):
            sent = await self._authorized(agent, headers, wait_seconds)
            last_result.set(None)
            answered = False
            try:
                async for event in client.subscribe(
                    request, context=self._context(sent.headers, wait_seconds)
                ):
                    answered = True
                    yield _to_dict(event)
                return
            except (TimeoutError, A2AClientTimeoutError) as exc:
                raise _timeout_or_unreachable(exc, agent, wait_seconds) from None
            except (A2AClientError, A2AError) as exc:
                await self._failure(agent, exc, sent, retry=attempt == 1 and not answered)
            except NOT_A2A as exc:
                raise not_a2a(exc) from None

    @staticmethod
    def _context(headers: dict[str, str], wait_seconds: float) -> ClientCallContext:
        return ClientCallContext(service_parameters=headers, timeout=wait_seconds)

    async def _unary(
        self,
        agent: Agent,
        call: Callable[[ClientCallContext], Awaitable[Any]],
        headers: dict[str, str],
        wait_seconds: float,
    ) -> dict[str, Any]:
        for attempt in (1, 2):
            sent = await self._authorized(agent, headers, wait_seconds)
            last_result.set(None)
            try:
                async with asyncio.timeout(wait_seconds):
                    answer = await call(self._context(sent.headers, wait_seconds))
            except (TimeoutError, A2AClientTimeoutError) as exc:
                raise _timeout_or_unreachable(exc, agent, wait_seconds) from None
            except (A2AClientError, A2AError) as exc:
                await self._failure(agent, exc, sent, retry=attempt == 1)
                continue
            except NOT_A2A as exc:
                raise not_a2a(exc) from None
            await self._got_through(agent)
            return _to_dict(answer)
        raise AssertionError("unreachable: the second attempt returns or raises")

    async def _authorized(self, agent: Agent, headers: dict[str, str], wait: float) -> Sent:
        """`headers` with the agent's credential, within `wait` seconds (an OAuth2 token may
        have to be fetched); an agent-auth error, noted on the agent, when none can be had."""
        if not agent.credential_sealed:
            return Sent(headers, headers)
        try:
            try:
                async with asyncio.timeout(max(wait, 0.0)):
                    return await self.auth.headers(agent, headers)
            except TimeoutError:
                raise failed(
                    agent,
                    self.auth.credential(agent),
                    f"cannot be called: no OAuth2 token, the token endpoint did not answer "
                    f"within the call's {wait:g} s",
                ) from None
        except AgentAuthFailed as exc:
            await self._auth_failed(agent, exc)
            raise

    async def _failure(self, agent: Agent, exc: Exception, sent: Sent, *, retry: bool) -> None:
        """Raise what the SDK's error `exc` means for the hub; return (nothing raised) when the
        agent refused an OAuth2 token and `retry` allows asking once more with a new one."""
        credential = self.auth.credential(agent) if agent.credential_sealed else None
        if how := refusal(exc):
            if retry and self.auth.retry(sent):
                return
            error = failed(agent, credential, f"refused the hub's credential: {how}")
            await self._auth_failed(agent, error)
            raise error from None
        if isinstance(exc, A2AClientError):  # an A2AError too: the transport's, first
            raise _transport_failure(scrub(str(exc), credential)) from None
        if isinstance(exc, A2AError):
            raise AgentRefused(f"the agent refused: {exc.message}", exc) from None
        raise exc

    @staticmethod
    async def _auth_failed(agent: Agent, exc: AgentAuthFailed) -> None:
        said = f"{agent.slug} {exc.message}"
        if agent.auth_failure != said:
            await db(agent_auth_failure_record, agent_id=agent.pk, failure=said)

    @staticmethod
    async def _got_through(agent: Agent) -> None:
        if agent.auth_failure:
            await db(agent_auth_failure_record, agent_id=agent.pk, failure="")

    async def close(self) -> None:
        for client in self._clients.values():
            await client.close()
        self._clients.clear()
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()
        await self._http.aclose()
        await self._session.close()


def _timeout_or_unreachable(exc: BaseException, agent: Agent, timeout: float) -> HubError:
    """A timeout, unless the connection was refused outright (reported as a connect timeout)."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, aiohttp.ClientConnectorError) and not isinstance(
            cause.os_error, TimeoutError
        ):
            return AgentUnreachable(f"unreachable: {cause.os_error.strerror or cause}")
        cause = cause.__cause__ or cause.__context__
    return AgentTimeout(f"{agent.slug} did not answer within {timeout:g} s")


# What the SDK's transports say when the agent's server could not be reached.
_UNREACHABLE = (
    "Network communication error",
    "HTTP client is closed",
    "gRPC Error UNAVAILABLE",
)


def _transport_failure(text: str) -> TargetUnavailable:
    if any(sign in text for sign in _UNREACHABLE):
        return AgentUnreachable(f"unreachable: {text}")
    return AgentFailed(f"failed: {text}")


_forwarders: dict[asyncio.AbstractEventLoop, EndpointForwarder] = {}


def forwarder() -> EndpointForwarder:
    """The forwarder of the running event loop (httpx clients belong to one loop)."""
    loop = asyncio.get_running_loop()
    found = _forwarders.get(loop)
    if found is None:
        for old in [lp for lp in _forwarders if lp.is_closed()]:
            del _forwarders[old]
        found = _forwarders[loop] = EndpointForwarder()
    return found


async def close_forwarder() -> None:
    found = _forwarders.pop(asyncio.get_running_loop(), None)
    if found is not None:
        await found.close()
