"""The gRPC binding: the official a2a-sdk client over gRPC, through the hub, to a JSON-RPC
agent and to a gRPC-only agent; auth, policy and errors as over JSON-RPC."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc
import grpc.aio
import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.auth.credentials import CredentialService
from a2a.client.auth.interceptor import AuthInterceptor
from a2a.client.client import Client
from a2a.client.errors import A2AClientError
from a2a.types import a2a_pb2_grpc
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError
from a2a.utils.grpc_status import status_from_call
from google.protobuf.json_format import MessageToDict
from google.rpc import error_details_pb2

from a2a_core.asyncdb import db
from a2a_core.models import Artifact as ArtifactRow
from a2a_core.models import Message, PushNotificationConfig, TaskEvent
from a2a_core.services.identity import issuer_trust
from a2a_core.services.policy import policy_publish
from tests.a2a_core.protocol.helpers import request, send, stored_messages, stored_task
from tests.identity import IdentityProvider

pytestmark = pytest.mark.live

FINAL = {"TASK_STATE_COMPLETED", "TASK_STATE_CANCELED", "TASK_STATE_FAILED"}


class Token(CredentialService):
    def __init__(self, token: str) -> None:
        self.token = token

    async def get_credentials(self, security_scheme_name: str, context: Any) -> str | None:
        return self.token


@pytest.fixture
async def grpc_sdk(grpc_hub, settings) -> AsyncIterator[Any]:
    """`await grpc_sdk(slug, token, streaming=...)` -> the official SDK client over gRPC,
    made from the agent's card at the hub, sending its token with the SDK's AuthInterceptor.
    Every agent's card lists the hub's gRPC interface (HUB_CARD_GRPC=always), a JSON-RPC
    agent's too."""
    settings.HUB_CARD_GRPC = "always"
    clients: list[Client] = []
    http = httpx.AsyncClient(timeout=30)

    async def make(slug: str, token: str, *, streaming: bool = False) -> Client:
        config = ClientConfig(
            streaming=streaming,
            httpx_client=http,
            supported_protocol_bindings=["GRPC"],
            grpc_channel_factory=grpc.aio.insecure_channel,
        )
        client = await ClientFactory(config).create_from_url(
            f"{grpc_hub.url}/a2a/{slug}".rstrip("/"),
            interceptors=[AuthInterceptor(Token(token))],
        )
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.close()
    await http.aclose()
    await grpc_hub.close()


async def _agent(hub, binding: str) -> str:
    await hub.endpoint_agent("worker", binding=binding)
    return "worker"


def _texts(task: Any) -> list[str]:
    return [p.text for a in task.artifacts for p in a.parts if p.text]


async def grpc_interfaces(url: str) -> list[Any]:
    async with httpx.AsyncClient(timeout=30) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
    return [i for i in card.supported_interfaces if i.protocol_binding == "GRPC"]


@pytest.mark.parametrize(
    ("setting", "listed_for"),
    [
        ("declared", {"grpc-agent", ""}),
        ("always", {"grpc-agent", "json-agent", ""}),
        ("never", set()),
    ],
)
async def test_cards_list_the_hub_s_grpc_interface_as_set_with_the_agent_as_tenant(
    grpc_hub, hub_grpc_port, settings, setting, listed_for
):
    """HUB_CARD_GRPC: "declared" (the default) lists the hub's gRPC interface in the card of an
    agent whose own card lists one (the hub's own card too), "always" in every card, "never"
    in none. The hub serves gRPC for every agent all the same."""
    settings.HUB_CARD_GRPC = setting
    await grpc_hub.endpoint_agent("grpc-agent", binding="GRPC")
    await grpc_hub.endpoint_agent("json-agent")
    listed = set()
    for tenant in ("grpc-agent", "json-agent", ""):
        interfaces = await grpc_interfaces(f"{grpc_hub.url}/a2a/{tenant}".rstrip("/"))
        for interface in interfaces:
            # host:port, what grpc.aio.insecure_channel dials (an http:// URL does not resolve).
            assert (interface.url, interface.tenant) == (f"127.0.0.1:{hub_grpc_port}", tenant)
            listed.add(tenant)
    assert listed == listed_for


@pytest.mark.parametrize("binding", ["JSONRPC", "GRPC"])
async def test_send_get_list_and_cancel_over_grpc(grpc_hub, grpc_sdk, binding):
    slug = await _agent(grpc_hub, binding)
    _, token = await grpc_hub.caller("alpha")
    client = await grpc_sdk(slug, token)

    task = await send(client, request("echo over grpc"))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert _texts(task) == ["echo: over grpc"]
    got = await client.get_task(GetTaskRequest(id=task.id))
    assert MessageToDict(got.status) == MessageToDict(task.status) and got.id == task.id
    listed = await client.list_tasks(ListTasksRequest())
    assert task.id in [t.id for t in listed.tasks]

    waiting = await send(client, request("later 30", return_immediately=True))
    assert TaskState.Name(waiting.status.state) not in FINAL
    canceled = await client.cancel_task(CancelTaskRequest(id=waiting.id))
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    assert (await stored_task(waiting.id)).state == "canceled"


@pytest.mark.parametrize("binding", ["JSONRPC", "GRPC"])
async def test_stream_and_subscribe_over_grpc(grpc_hub, grpc_sdk, binding):
    slug = await _agent(grpc_hub, binding)
    _, token = await grpc_hub.caller("alpha")
    client = await grpc_sdk(slug, token, streaming=True)

    streamed = [MessageToDict(e) async for e in client.send_message(request("stream 3"))]
    chunks = [
        p["text"]
        for e in streamed
        if "artifactUpdate" in e
        for p in e["artifactUpdate"]["artifact"]["parts"]
    ]
    assert chunks == ["chunk 0;", "chunk 1;", "chunk 2;"]
    assert streamed[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"

    unary = await grpc_sdk(slug, token)
    waiting = await send(unary, request("later 1", return_immediately=True))
    seen = []
    async for event in client.subscribe(SubscribeToTaskRequest(id=waiting.id)):
        seen.append(MessageToDict(event))
    states = [
        e.get("statusUpdate", {}).get("status", e.get("task", {}).get("status", {})).get("state")
        for e in seen
    ]
    assert states[-1] == "TASK_STATE_COMPLETED"
    assert any("done later" in str(e) for e in seen)


def _stub(port: int) -> tuple[grpc.aio.Channel, a2a_pb2_grpc.A2AServiceStub]:
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    return channel, a2a_pb2_grpc.A2AServiceStub(channel)


def _error_info(error: grpc.aio.AioRpcError) -> dict[str, Any]:
    status = status_from_call(error)
    assert status is not None
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            return {"reason": info.reason, "domain": info.domain, "metadata": dict(info.metadata)}
    raise AssertionError("no ErrorInfo")


async def test_refusals_carry_the_grpc_status_and_the_http_message(
    grpc_hub, hub_grpc_port, raw_http
):
    await grpc_hub.endpoint_agent("echo")
    _, token = await grpc_hub.caller("alpha")
    _, listener = await grpc_hub.caller("listener", scopes=["a2a:receive"])
    channel, stub = _stub(hub_grpc_port)
    send_request = request("echo hi")
    cases = [
        ("echo", None, grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED", 401),
        ("echo", "Bearer nope", grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED", 401),
        ("ghost", f"Bearer {token}", grpc.StatusCode.NOT_FOUND, "AGENT_NOT_FOUND", 404),
        ("echo", f"Bearer {listener}", grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED", 403),
    ]
    try:
        for slug, auth, code, reason, http_status in cases:
            send_request.tenant = slug
            metadata = [("authorization", auth)] if auth else []
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.SendMessage(send_request, metadata=metadata)
            over_http = await raw_http.post(
                f"/a2a/{slug}/rest/message:send",
                json=MessageToDict(request("echo hi")),
                headers={"A2A-Version": "1.0", **({"Authorization": auth} if auth else {})},
            )
            assert refused.value.code() == code
            assert over_http.status_code == http_status
            assert refused.value.details() == over_http.json()["error"]["message"]
            assert _error_info(refused.value)["reason"] == reason
    finally:
        await channel.close()


@pytest.fixture
async def raw_http(grpc_hub) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=grpc_hub.url, timeout=30) as client:
        yield client


async def test_a_matrix_deny_is_refused_with_the_json_rpc_reason(
    grpc_hub, grpc_sdk, sdk, hub_grpc_port
):
    await db(
        policy_publish,
        document={"matrix": [{"caller": "beta", "target": "echo", "action": "deny"}]},
        reason="test",
        actor_label="test",
    )
    await grpc_hub.endpoint_agent("echo")
    _, beta = await grpc_hub.caller("beta")

    with pytest.raises(A2AClientError) as over_jsonrpc:
        await send(await sdk("echo", beta), request("echo no"))
    channel, stub = _stub(hub_grpc_port)
    try:
        denied = request("echo no")
        denied.tenant = "echo"
        with pytest.raises(grpc.aio.AioRpcError) as over_grpc:
            await stub.SendMessage(denied, metadata=[("authorization", f"Bearer {beta}")])
    finally:
        await channel.close()
    with pytest.raises(A2AClientError) as over_grpc_sdk:
        await send(await grpc_sdk("echo", beta), request("echo no"))

    assert over_grpc.value.code() == grpc.StatusCode.PERMISSION_DENIED
    info = _error_info(over_grpc.value)
    assert info["reason"] == "POLICY_REJECTED" and info["domain"] == "a2a-protocol.org"
    assert info["metadata"]["reason"] == "denied_by_matrix"
    assert "-32053" in str(over_jsonrpc.value)
    assert over_grpc.value.details() in str(over_jsonrpc.value)
    assert over_grpc.value.details() in str(over_grpc_sdk.value)


# What differs between two calls whatever their binding: ids, times, the agent's own ids.
_PER_CALL = {
    "id",
    "context_id",
    "root_id",
    "trace_id",
    "deadline",
    "status_timestamp",
    "remote_task_id",
    "remote_context_id",
    "message_id",
    "task_id",
    "digest",
    "correlation_id",
    "in_reply_to_id",
    "latency_ms",
    "decision_latency_us",
    "call_times",
}


def _comparable(row: Any) -> dict[str, Any]:
    return {
        k: v
        for k, v in row.__dict__.items()
        if not k.startswith("_") and k not in _PER_CALL and not k.endswith("_at")
    }


@pytest.mark.parametrize("binding", ["JSONRPC", "GRPC"])
async def test_the_stored_rows_match_the_same_call_over_json_rpc(grpc_hub, grpc_sdk, sdk, binding):
    slug = await _agent(grpc_hub, binding)
    _, token = await grpc_hub.caller("alpha")
    over_jsonrpc = await send(await sdk(slug, token), request("echo same"))
    over_grpc = await send(await grpc_sdk(slug, token), request("echo same"))

    first, second = await stored_task(over_jsonrpc.id), await stored_task(over_grpc.id)
    assert _comparable(first) == _comparable(second)
    assert second.state == "completed" and second.remote_task_id
    first_messages = await stored_messages(over_jsonrpc.id)
    second_messages = await stored_messages(over_grpc.id)
    assert second_messages
    assert [_comparable(m) for m in first_messages] == [_comparable(m) for m in second_messages]
    recorded = await _artifacts_and_events(over_grpc.id)
    assert recorded[0] and recorded[1]
    assert await _artifacts_and_events(over_jsonrpc.id) == recorded


async def _artifacts_and_events(task_id: str) -> tuple[list[Any], list[Any]]:
    def read() -> tuple[list[Any], list[Any]]:
        artifacts = [
            (a.name, a.parts, a.metadata, a.complete)
            for a in ArtifactRow.objects.filter(task_id=task_id)
        ]
        events = list(TaskEvent.objects.filter(task_id=task_id).values_list("seq", "kind", "state"))
        return artifacts, events

    return await db(read)


async def test_a_grpc_only_agent_that_is_down_is_unreachable(grpc_hub, grpc_sdk):
    scripted, _, _ = await grpc_hub.endpoint_agent("gone", binding="GRPC")
    scripted.stop()
    _, token = await grpc_hub.caller("alpha")
    with pytest.raises(A2AClientError, match="UNAVAILABLE: gone unreachable: "):
        await send(await grpc_sdk("gone", token), request("echo anyone?"))


async def test_a_rate_limit_is_resource_exhausted_with_retry_after(grpc_hub, hub_grpc_port):
    await db(policy_publish, document={"limits": {"perMinute": 1}}, reason="t", actor_label="t")
    await grpc_hub.endpoint_agent("echo")
    _, token = await grpc_hub.caller("alpha")
    channel, stub = _stub(hub_grpc_port)
    auth = [("authorization", f"Bearer {token}")]
    try:
        first = request("echo one")
        first.tenant = "echo"
        assert (await stub.SendMessage(first, metadata=auth)).task.status.state == (
            TaskState.TASK_STATE_COMPLETED
        )
        second = request("echo two")
        second.tenant = "echo"
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.SendMessage(second, metadata=auth)
    finally:
        await channel.close()
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    info = _error_info(refused.value)
    assert info["reason"] == "RATE_LIMITED"
    retry_after = dict(refused.value.trailing_metadata() or ())["retry-after"]
    assert retry_after == info["metadata"]["retryAfterSeconds"]


async def test_the_hub_s_own_grpc_endpoint_answers_for_the_caller_s_tasks(grpc_hub, grpc_sdk):
    await grpc_hub.endpoint_agent("echo")
    _, token = await grpc_hub.caller("alpha")
    task = await send(await grpc_sdk("echo", token), request("echo mine"))
    hub_itself = await grpc_sdk("", token)

    got = await hub_itself.get_task(GetTaskRequest(id=task.id))
    assert got.id == task.id and _texts(got) == ["echo: mine"]
    with pytest.raises(TaskNotFoundError):
        await hub_itself.get_task(GetTaskRequest(id="no-such-task"))


async def test_a_request_over_the_size_limit_is_payload_too_large(
    grpc_hub, hub_grpc_port, settings
):
    await grpc_hub.endpoint_agent("echo")
    _, token = await grpc_hub.caller("alpha")
    limit = settings.HUB_MAX_BODY_BYTES
    big = request("echo " + "x" * limit)
    big.tenant = "echo"
    channel, stub = _stub(hub_grpc_port)
    try:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.SendMessage(big, metadata=[("authorization", f"Bearer {token}")])
    finally:
        await channel.close()
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    info = _error_info(refused.value)
    assert info["reason"] == "PAYLOAD_TOO_LARGE"
    assert info["metadata"] == {"limitBytes": str(limit)}
    assert f"at most {limit:,} bytes (HUB_MAX_BODY_BYTES)" in (refused.value.details() or "")


async def test_a_nul_character_is_refused_as_over_http(grpc_hub, hub_grpc_port, raw_http):
    await grpc_hub.endpoint_agent("echo")
    _, token = await grpc_hub.caller("alpha")
    nul = request("echo a\x00b")
    nul.tenant = "echo"
    channel, stub = _stub(hub_grpc_port)
    try:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.SendMessage(nul, metadata=[("authorization", f"Bearer {token}")])
    finally:
        await channel.close()
    over_http = await raw_http.post(
        "/a2a/echo/rest/message:send",
        json=MessageToDict(request("echo a\x00b")),
        headers={"A2A-Version": "1.0", "Authorization": f"Bearer {token}"},
    )
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert over_http.status_code == 400
    assert refused.value.details() == over_http.json()["error"]["message"]
    assert await db(lambda: TaskEvent.objects.count()) == 0


def _junk_cases() -> list[tuple[str, bytes, str, str]]:
    """(case, frame, reason, what the message says) for SendMessage."""
    good = request("echo hi")
    good.tenant = "echo"
    odd_tenant = request("echo hi")
    odd_tenant.tenant = "../echo"
    nothing = SendMessageRequest(tenant="echo")
    not_a_request = "the request is not a valid lf.a2a.v1.SendMessageRequest: "
    return [
        ("undecodable", b"\xff\xff\xff", "INVALID_REQUEST", not_a_request + "Wire format"),
        (
            "a Task",
            Task(id="t", context_id="c").SerializeToString(),
            "INVALID_REQUEST",
            not_a_request,
        ),
        ("cut short", good.SerializeToString()[:-3], "INVALID_REQUEST", not_a_request),
        (
            "bad UTF-8",
            b"\x0a\x02\xff\xfe",
            "INVALID_REQUEST",
            not_a_request + "String field had bad UTF-8",
        ),
        ("odd tenant", odd_tenant.SerializeToString(), "INVALID_PARAMS", "tenant '../echo' cannot"),
        ("no message", nothing.SerializeToString(), "INVALID_PARAMS", "message: Field is required"),
    ]


@pytest.mark.parametrize(
    ("frame", "reason", "says"), [c[1:] for c in _junk_cases()], ids=[c[0] for c in _junk_cases()]
)
async def test_a_junk_frame_is_invalid_argument_saying_why_and_one_warning_at_most(
    grpc_hub, hub_grpc_port, caplog, frame, reason, says
):
    await grpc_hub.endpoint_agent("echo")
    _, token = await grpc_hub.caller("alpha")
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{hub_grpc_port}")
    send_message = channel.unary_unary("/lf.a2a.v1.A2AService/SendMessage")
    try:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await send_message(frame, metadata=[("authorization", f"Bearer {token}")])
    finally:
        await channel.close()
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert says in (refused.value.details() or "")
    assert _error_info(refused.value)["reason"] == reason
    logged = [
        r for r in caplog.records if r.name.startswith("a2a_hub.grpc") or r.levelno >= logging.ERROR
    ]
    assert [r for r in logged if r.levelno >= logging.ERROR or r.exc_info] == []
    assert len(logged) <= 1


@pytest.mark.parametrize("version", ["0.3", "2.0", "banana", "1" * 5000])
async def test_a_version_other_than_1_is_not_supported(grpc_hub, hub_grpc_port, version):
    """FAILED_PRECONDITION, as A2A 1.0.1 maps VersionNotSupportedError to gRPC (section 5.4;
    1.0.0 said UNIMPLEMENTED, which 1.0.1 changed) and as the a2a-sdk 1.x answers it."""
    await grpc_hub.endpoint_agent("echo")
    _, token = await grpc_hub.caller("alpha")
    hello = request("echo hi")
    hello.tenant = "echo"
    channel, stub = _stub(hub_grpc_port)
    metadata = [("authorization", f"Bearer {token}"), ("a2a-version", version)]
    try:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.SendMessage(hello, metadata=metadata)
        metadata[1] = ("a2a-version", "1.0")
        assert (await stub.SendMessage(hello, metadata=metadata)).task.id
    finally:
        await channel.close()
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert _error_info(refused.value)["reason"] == "VERSION_NOT_SUPPORTED"
    assert "A2A 1.0" in (refused.value.details() or "")


# An agent that signs in with its identity provider's JWT does so over gRPC too, and a refused
# token is refused there with the same reason as over HTTP.

AUDIENCE = "https://hub.example/a2a"


@pytest.fixture
def provider():
    running = IdentityProvider()
    yield running
    running.stop()


async def test_a_jwt_signs_in_over_grpc_and_a_refused_one_says_why(
    grpc_hub, grpc_sdk, hub_grpc_port, provider
):
    await grpc_hub.endpoint_agent("echo")
    agent, _ = await grpc_hub.caller("robot")
    await db(
        issuer_trust,
        issuer=provider.issuer,
        jwks_url=provider.jwks_url,
        audience=AUDIENCE,
        agent=agent,
        value="robot-client",
    )
    token = provider.token("robot-client", audience=AUDIENCE)
    answer = await send(await grpc_sdk("echo", token), request("echo over grpc"))
    assert [p.text for a in answer.artifacts for p in a.parts] == ["echo: over grpc"]
    sent = await db(lambda: Message.objects.filter(sender__slug="robot", kind="request").count())
    assert sent == 1

    expired = provider.token("robot-client", audience=AUDIENCE, lifetime=-60)
    call = request("echo too late")
    call.tenant = "echo"
    channel, stub = _stub(hub_grpc_port)
    try:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.SendMessage(call, metadata=[("authorization", f"Bearer {expired}")])
    finally:
        await channel.close()
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert _error_info(refused.value)["metadata"] == {"jwt": "expired"}
    assert (refused.value.details() or "").startswith("the token expired at ")


@pytest.mark.parametrize("spelling", ["127.1", "0x7f000001", "2130706433", "localhost."])
async def test_a_push_config_to_another_spelling_of_loopback_is_refused_over_grpc(
    grpc_hub, grpc_sdk, settings, spelling
):
    settings.HUB_PUSH_ALLOWED_HOSTS = []
    await grpc_hub.endpoint_agent("echo")
    _, token = await grpc_hub.caller("alpha")
    client = await grpc_sdk("echo", token)
    task = await send(client, request("echo hi"))

    with pytest.raises(InvalidParamsError) as refused:
        await client.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=task.id, url=f"http://{spelling}:8080/hook")
        )

    host = spelling.rstrip(".")
    assert refused.value.message == (
        f"push notification url refused: url: {host} resolves to 127.0.0.1, which is a loopback "
        "address; the hub only POSTs to public addresses "
        "(an operator can allow it with HUB_PUSH_ALLOWED_HOSTS)"
    )
    assert not await db(lambda: PushNotificationConfig.objects.exists())


async def test_a_jwt_with_junk_in_its_header_is_unauthenticated_over_grpc(
    grpc_hub, hub_grpc_port, provider
):
    await grpc_hub.endpoint_agent("echo")
    agent, _ = await grpc_hub.caller("robot")
    await provider.trusted_for(agent)
    claims = {"iss": provider.issuer, "sub": "robot-client", "aud": AUDIENCE, "exp": 4_000_000_000}
    junk = {
        "a kid that is a number": provider.raw_token({"alg": "ES256", "kid": 7}, claims),
        "a header that is a list": provider.raw_token(["ES256"], claims),
        "an exp before any calendar": provider.raw_token(
            {"alg": "ES256", "kid": provider.keys[0].kid}, {**claims, "exp": -(10**30)}
        ),
    }
    call = request("echo junk")
    call.tenant = "echo"
    channel, stub = _stub(hub_grpc_port)
    refusals = {}
    try:
        for case, token in junk.items():
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.SendMessage(call, metadata=[("authorization", f"Bearer {token}")])
            refusals[case] = (refused.value.code(), _error_info(refused.value)["metadata"])
    finally:
        await channel.close()
    unauthenticated = grpc.StatusCode.UNAUTHENTICATED
    assert refusals == {
        "a kid that is a number": (unauthenticated, {"jwt": "malformed"}),
        "a header that is a list": (unauthenticated, {"jwt": "malformed"}),
        "an exp before any calendar": (unauthenticated, {"jwt": "expired"}),
    }
