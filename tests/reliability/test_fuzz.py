"""10,000 junk requests and frames across every entry point: no 5xx, no crash, still serving.

Seeded, so a failure reproduces. Junk is built from fragments of what each endpoint expects
(method names, paths, frame types, field names) mixed with wrong types, garbage bytes, deep
nesting and oversized values — closer to real mistakes than uniform noise.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
from typing import Any

import httpx
import pytest
import websockets
from a2a.types.a2a_pb2 import TaskState

from a2a_core.asyncdb import db
from a2a_core.models import InboxSession
from a2a_core.services.users import user_create
from tests.a2a_core.protocol.helpers import eventually, request, send
from tests.dashboard.test_live_security import PASSWORD, session_cookie, socket_url
from tests.factories import register

pytestmark = pytest.mark.live

SEED = 20261121
METHODS = [
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "SubscribeToTask",
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "message/send",
    "message/stream",
    "tasks/get",
    "tasks/cancel",
    "tasks/resubscribe",
    "tasks/pushNotificationConfig/set",
    "",
    "Nope",
    None,
    7,
]
REST_PATHS = [
    "message:send",
    "message:stream",
    "tasks",
    "tasks/{id}",
    "tasks/{id}:cancel",
    "tasks/{id}:subscribe",
    "tasks?contextId={id}&pageSize={id}",
    "tasks/{id}/pushNotificationConfigs",
    "card",
    "v1/message:send",
    "v1/message:stream",
    "v1/tasks/{id}",
    "v1/tasks/{id}:cancel",
    "",
    "../../admin",
]
FRAME_TYPES = ["ack", "status", "artifact", "ping", "delivery", "", None, 3, "x" * 300]
FIELDS = [
    "messageId",
    "role",
    "parts",
    "taskId",
    "contextId",
    "metadata",
    "extensions",
    "text",
    "data",
    "deliveryId",
    "deliveryIds",
    "state",
    "append",
    "lastChunk",
    "ref",
    "kind",
    "payload",
    "a2aHub",
    "timeoutSeconds",
    "askHuman",
    "paused",
    "agent",
]


def junk_value(rng: random.Random, depth: int = 0) -> Any:
    choice = rng.randrange(12 if depth < 6 else 8)
    if choice == 0:
        return None
    if choice == 1:
        return rng.choice([True, False])
    if choice == 2:
        return rng.choice([0, -1, 2**63, 1e308, float("1e-9"), 3.5])
    if choice == 3:
        return "".join(chr(rng.randrange(0x20, 0x2FFF)) for _ in range(rng.randrange(0, 40)))
    if choice == 4:
        return rng.choice(
            [
                "<script>x</script>",
                "\u0000",
                "\ud800",
                "x\udfffy",
                "ROLE_USER",
                "TASK_STATE_WORKING",
                "completed",
                "working",
                "💥",
                "' OR 1=1 --",
            ]
        )
    if choice == 5:
        return "x" * rng.choice([0, 1, 1000, 200_000])
    if choice == 6:
        return rng.choice(["", "a2ah_fake", "00000000-0000-0000-0000-000000000000"])
    if choice == 7:
        return rng.randrange(-5, 10**6)
    if choice in (8, 9):
        return {rng.choice(FIELDS): junk_value(rng, depth + 1) for _ in range(rng.randrange(0, 5))}
    return [junk_value(rng, depth + 1) for _ in range(rng.randrange(0, 4))]


def junk_body(rng: random.Random, shape: dict[str, Any]) -> bytes:
    roll = rng.random()
    if roll < 0.1:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(0, 200)))
    if roll < 0.2:
        return json.dumps(shape)[: rng.randrange(0, 60)].encode()
    if roll < 0.25:
        return b"[" * 5000 + b"]" * 5000
    if roll < 0.3:
        return json.dumps([shape, shape]).encode()
    body = dict(shape)
    for _ in range(rng.randrange(1, 4)):
        body[rng.choice([*FIELDS, *shape])] = junk_value(rng)
    return json.dumps(body).encode()


def query_text(value: Any) -> str:
    """A junk value as a query parameter: a string as it is (NUL included), else its JSON."""
    if (isinstance(value, str) and value.isprintable()) or value == "\x00":
        return value[:300]
    return json.dumps(value)[:300]


def rpc_shape(rng: random.Random) -> dict[str, Any]:
    message = {
        "messageId": f"fz-{rng.randrange(10**9)}",
        "role": "ROLE_USER",
        "parts": [{"text": rng.choice(["echo hi", "fail boom", "ask what?", "x"])}],
    }
    params: Any = {"message": message} if rng.random() < 0.7 else junk_value(rng)
    return {
        "jsonrpc": rng.choice(["2.0", "1.0", None]),
        "id": junk_value(rng),
        "method": rng.choice(METHODS),
        "params": params,
    }


@pytest.fixture
async def targets(hub):
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    inbox = await db(register, "duc", inbox=True)
    await db(user_create, username="vera", password=PASSWORD, role="viewer")
    return token, inbox.token, await session_cookie(hub.url, "vera")


async def test_ten_thousand_junk_inputs_get_no_5xx_and_the_hub_keeps_serving(
    hub, sdk, targets, caplog
):
    caller, inbox_token, cookie = targets
    rng = random.Random(SEED)
    caplog.set_level(logging.ERROR)
    statuses: dict[int, int] = {}
    internal: list[str] = []
    broken: list[str] = []
    fives: list[str] = []

    # A fresh connection per request: the hub closes a connection after refusing a body it
    # did not read (413), and a client reusing it would see that as a transport error.
    no_reuse = httpx.Limits(max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=hub.url, timeout=30, limits=no_reuse) as http:

        async def one_http(i: int) -> None:
            local = random.Random(SEED + i)
            headers = {"A2A-Version": local.choice(["1.0", "0.3", "9", ""])}
            if local.random() < 0.85:
                headers["Authorization"] = local.choice(
                    [f"Bearer {caller}", "Bearer nope", "Basic x"]
                )
            headers["Content-Type"] = local.choice(
                ["application/json", "text/plain", "application/json"]
            )
            if i >= 6000:  # frames an inbox agent posts instead of its websocket; discovery
                if i % 2:
                    frame = {"type": local.choice(FRAME_TYPES), "ref": junk_value(local)}
                    response = await http.post(
                        "/inbox/duc/",
                        content=junk_body(local, frame),
                        headers={"Authorization": f"Bearer {inbox_token}"},
                    )
                else:
                    names = ["skill", "tag", "status", "q", "limit", "cursor"]
                    params = {
                        local.choice(names): query_text(junk_value(local))
                        for _ in range(local.randrange(1, 4))
                    }
                    response = await http.get(
                        "/discover", params=params, headers={"Authorization": f"Bearer {caller}"}
                    )
            elif i % 7 < 4:  # JSON-RPC
                path = local.choice(["/a2a/echo/", "/a2a/", "/a2a/nobody/", "/a2a/echo"])
                response = await http.post(
                    path, content=junk_body(local, rpc_shape(local)), headers=headers
                )
                if response.headers.get("content-type", "").startswith("application/json"):
                    try:
                        error = response.json().get("error") or {}
                    except (ValueError, AttributeError):
                        error = {}
                    if isinstance(error, dict) and error.get("code") == -32603:
                        internal.append(response.text[:300])
            else:  # REST
                rest = local.choice(REST_PATHS).replace(
                    "{id}", local.choice(["x", "1", "../", "%00"])
                )
                method = local.choice(["GET", "POST", "DELETE", "PUT", "PATCH"])
                shape = rpc_shape(local)["params"]
                body = junk_body(local, shape if isinstance(shape, dict) else {})
                response = await http.request(
                    method, f"/a2a/echo/rest/{rest}", content=body, headers=headers
                )
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
            if response.status_code >= 500:
                fives.append(
                    f"{response.request.method} {response.request.url.path}: {response.text[:160]}"
                )

        async def guarded(i: int) -> None:
            try:
                await one_http(i)
            except httpx.TransportError as exc:
                broken.append(f"request {i}: {exc!r}")

        for start in range(0, 7000, 50):
            await asyncio.gather(*(guarded(i) for i in range(start, start + 50)))

    async def frames(url: str, count: int, **connect: Any) -> int:
        closed = 0
        sent = 0
        while sent < count:
            try:
                async with websockets.connect(url, max_size=None, **connect) as ws:
                    while sent < count:
                        frame: Any = {"type": rng.choice(FRAME_TYPES)}
                        frame.update(
                            {
                                rng.choice(FIELDS): junk_value(rng)
                                for _ in range(rng.randrange(0, 4))
                            }
                        )
                        raw = (
                            json.dumps(frame)
                            if rng.random() < 0.85
                            else junk_body(rng, frame).decode("latin-1")
                        )
                        await ws.send(raw)
                        sent += 1
                        if sent % 20 == 0:  # drain answers now and then
                            with contextlib.suppress(TimeoutError):
                                while True:
                                    await asyncio.wait_for(ws.recv(), 0.01)
            except websockets.ConnectionClosed as exc:
                closed += 1
                assert exc.rcvd is None or exc.rcvd.code in (1000, 1009, 4401, 4403, 4404, 4409), (
                    exc
                )
        return closed

    ws_base = hub.url.replace("http://", "ws://")
    await frames(
        f"{ws_base}/ws/agents/duc/",
        2000,
        additional_headers={"Authorization": f"Bearer {inbox_token}"},
    )
    await frames(socket_url(hub.url), 1000, origin=hub.url, additional_headers={"Cookie": cookie})

    assert broken == []
    assert fives == [], (statuses, fives[:5])
    assert internal == []
    # Callers' junk is a warning at most: an error in the log is a fault of the hub.
    errors = [
        f"{r.getMessage()} {(r.exc_text or '')[-400:]}"
        for r in caplog.records
        if r.levelno >= logging.ERROR or r.exc_info
    ]
    assert errors == [], errors[:5]
    # Still serving: a real call goes through.
    task = await send(await sdk("echo", caller), request("echo still here"))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED

    async def sockets_closed() -> bool:
        return not await db(InboxSession.objects.exists)

    try:
        await eventually(sockets_closed, within=30)
    except AssertionError:
        left = await db(
            lambda: list(InboxSession.objects.values("transport", "channel", "seen_at"))
        )
        raise AssertionError(f"inbox sessions left open: {left}") from None
