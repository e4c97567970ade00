"""Junk over the hub's gRPC port, with a real gRPC channel: 2,000 seeded frames to every method
of A2A's service (undecodable bytes, another method's message, fields of the wrong wire type,
truncated and oversized frames, odd tenants and metadata, unknown methods) and streams
cancelled midway, while another caller's real calls go on beside them.

Each junk call gets a status that says why (never UNKNOWN or INTERNAL, always a message); the
other caller gets every answer; the log gets no error and at most a few rate-limited warnings.
Seeded, so a failure reproduces; a summary of the statuses is printed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import re
import time
from collections import Counter

import grpc
import grpc.aio
import pytest
from a2a.types import a2a_pb2, a2a_pb2_grpc
from django.conf import settings
from google.protobuf import message_factory
from google.protobuf.message import Message as Proto

from tests.a2a_core.protocol.helpers import request

pytestmark = pytest.mark.live

SEED = 20261129
FRAMES = 2000
AT_ONCE = 40
SERVICE = a2a_pb2.DESCRIPTOR.services_by_name["A2AService"]
METHODS = {m.name: message_factory.GetMessageClass(m.input_type) for m in SERVICE.methods}
STREAMING = {m.name for m in SERVICE.methods if m.server_streaming}
# What junk may get: each says what was wrong. UNKNOWN and INTERNAL would be the hub's fault.
TOLD = {
    grpc.StatusCode.OK,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.UNIMPLEMENTED,
}
# The most warnings of one kind a minute (a2a_core.logging.warn_limited).
WARNINGS_A_MINUTE = 10
ODD_TENANTS = ["echo"] * 8 + [
    "",
    "echo",
    "nobody",
    "ECHO",
    "e\x00cho",
    "../echo",
    "x" * 5000,
    "écho",
    "rest",
]


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field_soup(rng: random.Random) -> bytes:
    """Tags of random fields with random wire types and contents: some parse, most do not."""
    out = bytearray()
    for _ in range(rng.randrange(1, 8)):
        number, wire = rng.randrange(1, 20), rng.choice([0, 1, 2, 3, 5, 7])
        out += _varint(number << 3 | wire)
        if wire == 0:
            out += _varint(rng.getrandbits(rng.choice([7, 32, 64])))
        elif wire == 1:
            out += rng.randbytes(8)
        elif wire == 5:
            out += rng.randbytes(4)
        elif wire == 2:
            body = rng.randbytes(rng.randrange(0, 40))
            out += _varint(len(body) + rng.choice([0, 0, 0, 5, -1 if body else 0])) + body
    return bytes(out)


def _plausible(name: str, rng: random.Random) -> Proto:
    """A well-formed request for method `name`, with odd values here and there."""
    tenant = rng.choice(ODD_TENANTS)
    if name in ("SendMessage", "SendStreamingMessage"):
        built = request(
            rng.choice(["echo junk", "stream 2", "fail no", "reply hi"]),
            message_id=str(rng.random()),
        )
        if rng.random() < 0.3:
            built.message.ClearField("parts")
        built.tenant = tenant
        return built
    built = METHODS[name]()
    for field in built.DESCRIPTOR.fields:
        if field.name == "tenant":
            built.tenant = tenant
        elif field.type == field.TYPE_STRING and not field.is_repeated:
            setattr(built, field.name, rng.choice(["", "x", "no-such-task", "\u2028", "a/b"]))
    return built


def junk(i: int) -> tuple[str, bytes]:
    """Call i: (method path, frame)."""
    rng = random.Random(SEED + i)
    name = rng.choice(sorted(METHODS))
    valid = _plausible(name, rng).SerializeToString()
    kind = i % 10
    if kind == 0:
        frame = rng.randbytes(rng.randrange(0, 300))
    elif kind == 1:  # another method's message
        other = rng.choice(sorted(set(METHODS) - {name}))
        frame = _plausible(other, rng).SerializeToString() or b"\x08\x01"
    elif kind == 2:  # a field of the wrong wire type: the first tag's type changed
        frame = bytes([(valid[0] & ~0x07) | rng.choice([0, 1, 5])]) + valid[1:] if valid else b""
    elif kind == 3 and len(valid) > 1:
        frame = valid[: rng.randrange(1, len(valid))]
    elif kind == 4:
        frame = _field_soup(rng)
    elif kind == 5:  # bad UTF-8 in a string field (field 1 of every request is a string)
        frame = b"\x0a\x03\xff\xfe\xfd" + valid
    else:
        frame = valid
    path = f"/{SERVICE.full_name}/{name}"
    if i % 97 == 0:
        path = rng.choice([f"/{SERVICE.full_name}/NoSuchMethod", "/other.Service/SendMessage"])
    return path, frame


def junk_metadata(i: int, token: str) -> list[tuple[str, str | bytes]]:
    rng = random.Random(SEED - i)
    metadata: list[tuple[str, str | bytes]] = []
    auth = rng.choice([f"Bearer {token}"] * 4 + ["", "Bearer nope", "Basic eA==", "Bearer a.b.c"])
    if auth:
        metadata.append(("authorization", auth))
    # "1" * 5000: a version by its grammar whose number Python refuses to read.
    versions = ["1.0"] * 6 + ["", "0.3", "9.1", "banana", "1" * 5000]
    metadata.append(("a2a-version", rng.choice(versions)))
    if rng.random() < 0.2:
        metadata.append(("x-junk-bin", rng.randbytes(rng.randrange(0, 64))))
    if i % 149 == 7:  # past gRPC's metadata limits
        metadata.append(("x-huge", "h" * rng.choice([9000, 20000])))
    return metadata


class Tally:
    def __init__(self) -> None:
        self.codes: Counter[str] = Counter()
        self.faults: list[str] = []

    def answer(self, path: str, code: grpc.StatusCode, details: str | None) -> None:
        self.codes[code.name] += 1
        if code not in TOLD or (code != grpc.StatusCode.OK and not details):
            self.faults.append(f"{path}: {code.name} {details!r}"[:300])


async def fuzz_grpc(channel: grpc.aio.Channel, token: str, tally: Tally) -> None:
    async def one(i: int) -> None:
        path, frame = junk(i)
        metadata = junk_metadata(i, token)
        try:
            if path.rsplit("/", 1)[-1] in STREAMING:
                stream = channel.unary_stream(path)(frame, metadata=metadata, timeout=30)
                async for _ in stream:
                    pass
            else:
                await channel.unary_unary(path)(frame, metadata=metadata, timeout=30)
        except grpc.aio.AioRpcError as error:
            tally.answer(path, error.code(), error.details())
        else:
            tally.answer(path, grpc.StatusCode.OK, "")

    for start in range(0, FRAMES, AT_ONCE):
        await asyncio.gather(*(one(i) for i in range(start, start + AT_ONCE)))


async def oversized(channel: grpc.aio.Channel, token: str, tally: Tally) -> None:
    """Frames past the hub's body limit, and past gRPC's own limit (twice the body limit)."""
    limit = settings.HUB_MAX_BODY_BYTES
    for size in (limit + 1000, 2 * limit + 1000):
        big = request("echo " + "x" * size)
        big.tenant = "echo"
        path = f"/{SERVICE.full_name}/SendMessage"
        try:
            await channel.unary_unary(path)(
                big.SerializeToString(), metadata=[("authorization", f"Bearer {token}")]
            )
        except grpc.aio.AioRpcError as error:
            tally.answer(path, error.code(), error.details())
        else:
            tally.faults.append(f"a frame of {size:,} bytes was accepted")


async def cancelled_midway(stub: a2a_pb2_grpc.A2AServiceStub, token: str) -> int:
    """Streams the caller walks away from after their first event: SendStreamingMessage and
    SubscribeToTask. Returns how many were cancelled."""
    metadata = [("authorization", f"Bearer {token}")]
    cancelled = 0
    for i in range(10):
        streamed = request("stream 5 0.1", message_id=f"walks-away-{i}")
        streamed.tenant = "echo"
        call = stub.SendStreamingMessage(streamed, metadata=metadata)
        first = await call.read()
        call.cancel()
        cancelled += 1
        task_id = first.task.id or first.status_update.task_id
        subscription = stub.SubscribeToTask(
            a2a_pb2.SubscribeToTaskRequest(tenant="echo", id=task_id), metadata=metadata
        )
        # The task may have ended already: then there is nothing to follow.
        with contextlib.suppress(grpc.aio.AioRpcError):
            await subscription.read()
        subscription.cancel()
        cancelled += 1
    return cancelled


async def test_two_thousand_junk_grpc_frames_get_a_status_saying_why_and_cost_no_other_caller(
    grpc_hub, hub_grpc_port, caplog
):
    await grpc_hub.endpoint_agent("echo")
    _, junk_token = await grpc_hub.caller("junk")
    _, good_token = await grpc_hub.caller("good")
    caplog.set_level(logging.WARNING)
    tally = Tally()
    started = time.monotonic()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{hub_grpc_port}")
    good_channel = grpc.aio.insecure_channel(f"127.0.0.1:{hub_grpc_port}")
    stub = a2a_pb2_grpc.A2AServiceStub(channel)
    good = a2a_pb2_grpc.A2AServiceStub(good_channel)
    answered: list[str] = []
    done = asyncio.Event()

    async def the_other_caller() -> None:
        """A caller with nothing to do with the junk, calling all along."""
        n = 0
        while not done.is_set() or n < 5:
            call = request(f"echo still {n}")
            call.tenant = "echo"
            got = await good.SendMessage(
                call, metadata=[("authorization", f"Bearer {good_token}")], timeout=30
            )
            answered.append(got.task.artifacts[0].parts[0].text)
            n += 1

    try:
        other = asyncio.create_task(the_other_caller())
        await fuzz_grpc(channel, junk_token, tally)
        await oversized(channel, junk_token, tally)
        cancelled = await cancelled_midway(stub, junk_token)
        done.set()
        await asyncio.wait_for(other, 60)
    finally:
        await channel.close()
        await good_channel.close()
    print(
        f"\ngRPC fuzz (seed {SEED}, {time.monotonic() - started:.1f} s): {dict(tally.codes)}, "
        f"{cancelled} streams cancelled midway, {len(answered)} calls of another caller"
    )

    assert tally.faults == [], tally.faults[:5]
    assert sum(tally.codes.values()) == FRAMES + 2
    assert answered == [f"echo: still {n}" for n in range(len(answered))]
    # Callers' junk is no error of the hub's: a few warnings at most, each one line.
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert errors == [], errors[:5]
    warnings = Counter(
        re.sub(r" \(\d+ more like it were not logged\)$", "", r.getMessage())
        for r in caplog.records
        if r.levelno == logging.WARNING
    )
    assert all(count <= WARNINGS_A_MINUTE for count in warnings.values()), warnings
