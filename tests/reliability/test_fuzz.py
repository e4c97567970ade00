"""Over 10,000 junk requests and frames across JSON-RPC, REST, the long-poll and both
websockets: no 5xx, no connection dropped after an error reply, the database consistent.

Seeded (`junk.py`), so a failure reproduces. Bodies under the size limit go over a pool of
keep-alive connections, so a connection the hub drops after answering an error shows up as a
transport error on the next request that reuses it; oversized bodies go on fresh connections
(the hub closes a connection whose body it refused unread, as it may). A summary of what came
back is printed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
from collections import Counter
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
import websockets
from a2a.types.a2a_pb2 import TaskState
from django.conf import settings
from django.db.models import Count, F
from django.utils import timezone
from jwt.algorithms import ECAlgorithm
from starlette.requests import Request
from starlette.responses import Response

from a2a_core.asyncdb import db
from a2a_core.models import ACTIVE_STATES, Delivery, InboxSession, Message, Task
from a2a_core.services.users import user_create
from tests.a2a_core.protocol.helpers import eventually, request, send
from tests.dashboard.test_live_security import PASSWORD, session_cookie, socket_url
from tests.factories import register
from tests.identity import AUDIENCE, IdentityProvider, hang
from tests.reliability.junk import (
    OVERSIZED,
    REST_PATHS,
    WAITS,
    frame_text,
    junk_body,
    junk_frame,
    junk_host,
    junk_jwt,
    junk_value,
    jwks_answer,
    poll_body,
    query_text,
    rpc_shape,
)

pytestmark = pytest.mark.live

SEED = 20261121
HTTP_REQUESTS = 8000
INBOX_FRAMES = 2000
DASHBOARD_FRAMES = 1000
# Closing a websocket for a frame over the size limit (1009) is the protocol's answer; any
# other close after a junk frame drops an agent for a mistake it could have been told about.
OVERSIZED_FRAME = 1009


@pytest.fixture
async def targets(hub):
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    inbox = await db(register, "duc", inbox=True)
    poller = await db(register, "pia", inbox=True)
    await db(user_create, username="vera", password=PASSWORD, role="viewer")
    return token, inbox.token, poller.token, await session_cookie(hub.url, "vera")


class Tally:
    """What came back, per entry point: status codes, error codes, failures."""

    def __init__(self) -> None:
        self.statuses: Counter[tuple[str, int]] = Counter()
        self.codes: Counter[tuple[str, Any]] = Counter()
        self.fives: list[str] = []
        self.internal: list[str] = []
        self.dropped: list[str] = []
        self.closes: Counter[tuple[str, int | None]] = Counter()

    def response(self, entry: str, response: httpx.Response) -> None:
        self.statuses[entry, response.status_code] += 1
        code = error_code(response)
        if code is not None:
            self.codes[entry, code] += 1
        if response.status_code >= 500:
            self.fives.append(f"{entry} {response.request.url.path}: {response.text[:160]}")
        if code == -32603:
            self.internal.append(response.text[:300])

    def summary(self, seconds: float) -> str:
        entries = sorted({entry for entry, _ in self.statuses} | {e for e, _ in self.closes})
        lines = [f"fuzz summary (seed {SEED}, {seconds:.1f} s):"]
        for entry in entries:
            statuses = {s: n for (e, s), n in sorted(self.statuses.items()) if e == entry}
            codes = {str(c): n for (e, c), n in self.codes.items() if e == entry}
            closes = {str(c): n for (e, c), n in self.closes.items() if e == entry}
            total = sum(statuses.values()) or sum(closes.values())
            lines.append(f"  {entry}: {total} statuses={statuses} errors={codes} closes={closes}")
        lines.append(f"  dropped connections: {len(self.dropped)}, 5xx: {len(self.fives)}")
        return "\n".join(lines)


def error_code(response: httpx.Response) -> Any:
    """The error's code in the body (JSON-RPC's number, REST's status, the inbox's code)."""
    if not response.headers.get("content-type", "").startswith("application/json"):
        return None
    try:
        body = response.json()
    except ValueError:
        return None
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return None
    return error.get("status") or error.get("code")


def http_request(i: int, caller: str, poller: str) -> tuple[str, str, str, bytes, dict[str, str]]:
    """Request i: (entry point, method, path, body, headers)."""
    rng = random.Random(SEED + i)
    # "1" * 5000: a version by its grammar whose number Python refuses to read.
    headers = {"A2A-Version": rng.choice(["1.0", "0.3", "9", "", "1" * 5000])}
    headers["Content-Type"] = rng.choice(["application/json", "text/plain", "application/json"])
    kind = i % 8
    if kind >= 6:  # the long-poll, mostly with the inbox agent's own token
        if rng.random() < 0.85:
            headers["Authorization"] = rng.choice(
                [f"Bearer {poller}", f"Bearer {poller}", f"Bearer {caller}", "Bearer nope"]
            )
        slug = rng.choice(["pia", "pia", "pia", "echo", "nobody", "%ED%A0%80"])
        if kind == 6:
            return "poll GET", "GET", f"/inbox/{slug}/?wait={rng.choice(WAITS)}", b"", headers
        return "poll POST", "POST", f"/inbox/{slug}/", poll_body(rng), headers
    if rng.random() < 0.85:
        headers["Authorization"] = rng.choice([f"Bearer {caller}", "Bearer nope", "Basic x"])
    if i % 16 == 5:  # discovery's query string
        names = ["skill", "tag", "status", "q", "limit", "cursor"]
        query = urlencode(
            {rng.choice(names): query_text(junk_value(rng)) for _ in range(rng.randrange(1, 4))}
        )
        return "discovery", "GET", f"/discover?{query}", b"", headers
    if kind < 4:
        path = rng.choice(["/a2a/echo/", "/a2a/", "/a2a/nobody/", "/a2a/echo"])
        return "JSON-RPC", "POST", path, junk_body(rng, rpc_shape(rng)), headers
    rest = rng.choice(REST_PATHS).replace("{id}", rng.choice(["x", "1", "../", "%00", "%ED%A0%80"]))
    method = rng.choice(["GET", "POST", "DELETE", "PUT", "PATCH"])
    shape = rpc_shape(rng)["params"]
    body = junk_body(rng, shape if isinstance(shape, dict) else {})
    return "REST", method, f"/a2a/echo/rest/{rest}", body, headers


async def fuzz_http(url: str, caller: str, poller: str, tally: Tally) -> None:
    pooled = httpx.AsyncClient(base_url=url, timeout=30, limits=httpx.Limits(max_connections=20))
    fresh = httpx.AsyncClient(
        base_url=url, timeout=30, limits=httpx.Limits(max_keepalive_connections=0)
    )
    async with pooled, fresh:

        async def one(i: int) -> None:
            entry, method, path, body, headers = http_request(i, caller, poller)
            oversized = i % 250 == 3 and method != "GET"
            if oversized:
                body = b'{"x": "' + b"x" * OVERSIZED + b'"}'
            client = fresh if oversized or len(body) > settings.HUB_MAX_BODY_BYTES else pooled
            try:
                response = await client.request(method, path, content=body, headers=headers)
            except httpx.TransportError as exc:
                if client is pooled:
                    tally.dropped.append(f"{entry} {method} {path}: {exc!r}")
                else:
                    tally.fives.append(f"{entry} {method} {path}: no answer: {exc!r}")
                return
            tally.response(entry, response)

        for start in range(0, HTTP_REQUESTS, 40):
            await asyncio.gather(*(one(i) for i in range(start, start + 40)))


async def fuzz_frames(
    entry: str, url: str, count: int, rng: random.Random, tally: Tally, **connect: Any
) -> None:
    sent = 0
    while sent < count:
        try:
            async with websockets.connect(url, max_size=None, **connect) as ws:
                while sent < count:
                    await ws.send(frame_text(rng, junk_frame(rng)))
                    sent += 1
                    if sent % 20 == 0:  # drain answers now and then
                        with contextlib.suppress(TimeoutError):
                            while True:
                                await asyncio.wait_for(ws.recv(), 0.01)
                tally.closes[entry, None] += 1
        except websockets.ConnectionClosed as exc:
            code = exc.rcvd.code if exc.rcvd else None
            tally.closes[entry, code] += 1
            if code != OVERSIZED_FRAME:
                tally.dropped.append(f"{entry} closed after frame {sent}: {exc}")


def inconsistencies() -> dict[str, list[Any]]:
    """What a half-written batch would leave behind, and tasks the sweeper let through."""
    grace = timedelta(seconds=settings.HUB_ABANDONED_GRACE_SECONDS)
    found = {
        "task without its request message": list(
            Task.objects.exclude(messages__direction="request").values_list("pk", flat=True)
        ),
        "message of a task that does not exist": list(
            Message.objects.filter(task__isnull=False)
            .exclude(task_id__in=Task.objects.values("pk"))
            .values_list("pk", flat=True)
        ),
        "event_seq differing from its events": list(
            Task.objects.annotate(events_count=Count("events"))
            .exclude(event_seq=F("events_count"))
            .values_list("pk", "event_seq", "events_count")
        ),
        "delivery of a message that does not exist": list(
            Delivery.objects.exclude(message_id__in=Message.objects.values("pk")).values_list(
                "pk", flat=True
            )
        ),
        "delivery of a task that does not exist": list(
            Delivery.objects.filter(task__isnull=False)
            .exclude(task_id__in=Task.objects.values("pk"))
            .values_list("pk", flat=True)
        ),
        "task open past its deadline and grace": list(
            Task.objects.filter(
                state__in=list(ACTIVE_STATES), deadline__lt=timezone.now() - grace
            ).values_list("pk", "state", "deadline")
        ),
    }
    return {check: rows for check, rows in found.items() if rows}


async def test_ten_thousand_junk_inputs_get_no_5xx_and_the_hub_keeps_serving(
    hub, sdk, targets, caplog
):
    caller, inbox_token, poller, cookie = targets
    caplog.set_level(logging.ERROR)
    tally = Tally()
    started = time.monotonic()

    await fuzz_http(hub.url, caller, poller, tally)
    rng = random.Random(SEED)
    await fuzz_frames(
        "inbox websocket",
        f"{hub.url.replace('http://', 'ws://')}/ws/agents/duc/",
        INBOX_FRAMES,
        rng,
        tally,
        additional_headers={"Authorization": f"Bearer {inbox_token}"},
    )
    await fuzz_frames(
        "dashboard websocket",
        socket_url(hub.url),
        DASHBOARD_FRAMES,
        rng,
        tally,
        origin=hub.url,
        additional_headers={"Cookie": cookie},
    )
    print("\n" + tally.summary(time.monotonic() - started))

    assert tally.fives == [], tally.fives[:5]
    assert tally.dropped == [], tally.dropped[:5]
    assert tally.internal == [], tally.internal[:5]
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

    async def consistent() -> bool:
        return not await db(inconsistencies)

    with contextlib.suppress(AssertionError):  # the sweeper's pass comes every second
        await eventually(consistent, within=10)
    assert await db(inconsistencies) == {}

    async def sockets_closed() -> bool:
        return not await db(InboxSession.objects.filter(transport="websocket").exists)

    try:
        await eventually(sockets_closed, within=30)
    except AssertionError:
        left = await db(
            lambda: list(InboxSession.objects.values("transport", "channel", "seen_at"))
        )
        raise AssertionError(f"inbox sessions left open: {left}") from None


# --- Agents' own identities and Host headers ---------------------------------------------
# JWT-shaped tokens with junk of any type in their header and claims (most signed with the
# trusted issuer's real key, so that only what they hold is wrong), sent while a real JWKS
# server answers junk of every kind (and now and then the good set, or nothing in time), and
# Host headers no hub answers to, on every HTTP entry point.

JWT_REQUESTS = 600
HOST_REQUESTS = 165
JWT_ENTRIES = [
    ("JSON-RPC", "POST", "/a2a/echo/"),
    ("REST", "GET", "/a2a/echo/rest/tasks/x"),
    ("discovery", "GET", "/discover"),
    ("poll GET", "GET", "/inbox/pia/?wait=0"),
]
HOST_PATHS = [
    "/",
    "/login/",
    "/agents/",
    "/admin/",
    "/static/css/hub.css",
    "/.well-known/agent-card.json",
    "/a2a/echo/.well-known/agent-card.json",
    "/a2a/echo/",
    "/discover",
    "/inbox/pia/?wait=0",
    "/metrics",
]


@pytest.fixture
async def jwt_targets(hub, settings):
    """echo, robot (whose identity provider's `robot-client` signs in as it) and the inbox
    agent pia; the provider's JWKS answers junk drawn from a seeded generator."""
    settings.HUB_JWKS_TIMEOUT = 0.5
    # Every call asks the JWKS again (concurrent ones share a fetch), so every kind of junk
    # it answers is met by some token.
    settings.HUB_JWKS_CACHE_SECONDS = 0
    settings.HUB_JWKS_FAILURE_CACHE_SECONDS = 0
    settings.HUB_JWKS_REFRESH_COOLDOWN = 0
    provider = IdentityProvider()
    rng = random.Random(SEED)
    good = {"keys": [key.public_jwk() for key in provider.keys]}

    async def misbehave(request: Request) -> Response:
        if rng.random() < 0.02:
            return await hang(request)
        status, headers, body = jwks_answer(rng, good)
        return Response(body, status_code=status, headers=headers)

    provider.misbehave = misbehave
    await hub.endpoint_agent("echo")
    robot, _ = await hub.caller("robot")
    await db(register, "pia", inbox=True)
    await provider.trusted_for(robot)
    yield provider
    provider.stop()


async def test_junk_jwts_jwks_answers_and_host_headers_get_no_5xx(hub, jwt_targets, caplog):
    provider = jwt_targets
    caplog.set_level(logging.WARNING)
    tally = Tally()
    started = time.monotonic()
    rng = random.Random(SEED)
    key = provider.keys[0]
    header = {"alg": "ES256", "kid": key.kid, "typ": "JWT"}
    claims = {"iss": provider.issuer, "sub": "robot-client", "aud": AUDIENCE, "exp": 4_000_000_000}
    signer = ECAlgorithm(ECAlgorithm.SHA256)

    def sign(signing_input: bytes) -> bytes:
        return signer.sign(signing_input, key.private)

    async with httpx.AsyncClient(
        base_url=hub.url, timeout=30, limits=httpx.Limits(max_connections=20)
    ) as http:

        async def one(
            entry: str, method: str, path: str, headers: dict[str, Any], body: bytes = b""
        ) -> None:
            try:
                response = await http.request(method, path, content=body, headers=headers)
            except httpx.TransportError as exc:
                tally.dropped.append(f"{entry} {method} {path}: {exc!r}")
                return
            tally.response(entry, response)

        def jwt_request(i: int) -> Any:
            token = junk_jwt(rng, header, claims, sign)
            auth = b"Bearer " + token if isinstance(token, bytes) else f"Bearer {token}".encode()
            entry, method, path = JWT_ENTRIES[i % len(JWT_ENTRIES)]
            body = json.dumps(rpc_shape(rng)).encode() if method == "POST" else b""
            headers = {"A2A-Version": "1.0", "Authorization": auth}
            return one(f"JWT {entry}", method, path, headers, body)

        # 20 at a time, each next one sent as soon as one is answered.
        room = asyncio.Semaphore(20)

        async def held(request: Any) -> None:
            async with room:
                await request

        await asyncio.gather(*(held(jwt_request(i)) for i in range(JWT_REQUESTS)))
        await asyncio.gather(
            *(
                held(one("Host", "GET", HOST_PATHS[i % len(HOST_PATHS)], {"Host": junk_host(rng)}))
                for i in range(HOST_REQUESTS)
            )
        )
    print("\n" + tally.summary(time.monotonic() - started))

    # 503 is the answer while the JWKS is unavailable (IDENTITY_PROVIDER_UNAVAILABLE).
    fives = [five for five in tally.fives if "cannot check the token: the JWKS at" not in five]
    assert fives == [], fives[:5]
    assert tally.dropped == [], tally.dropped[:5]
    assert tally.internal == [], tally.internal[:5]
    seen = {status for (_, status) in tally.statuses}
    assert {200, 401, 503} <= seen  # signed in, refused, and the JWKS unavailable, all met
    # The JWKS server's own log (its requests cut off by the hub's deadline) is not the hub's.
    jwks_server = f"server-{provider.server.port}"
    errors = [
        f"{r.name}: {r.getMessage()} {(r.exc_text or '')[-400:]}"
        for r in caplog.records
        if (r.levelno >= logging.ERROR or r.exc_info) and r.threadName != jwks_server
    ]
    assert errors == [], errors[:5]
    warnings = Counter(
        r.getMessage().split(":")[0] for r in caplog.records if r.name.startswith("a2a_hub.")
    )
    assert all(count <= 10 for count in warnings.values()), warnings.most_common(3)
