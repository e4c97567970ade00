"""`a2a serve` serves gRPC beside HTTP, on the HTTP port + 1 by default, in every worker, and
says where."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time

import grpc
import grpc.aio
import httpx
import pytest
from a2a.types import a2a_pb2_grpc
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest
from django.conf import settings

from tests.a2a_core.cli.helpers import MANAGE, cli_environment
from tests.a2a_core.cli.test_serve_workers import LISTEN, owner_counts, sockets_on
from tests.a2a_core.demo.helpers import children_of
from tests.servers import free_port

pytestmark = pytest.mark.django_db(transaction=True)


def _lines_until(process: subprocess.Popen[str], marker: str, timeout: float = 60) -> list[str]:
    assert process.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip())
        if marker in line:
            return lines
    raise AssertionError(f"a2a serve never said {marker!r}: {lines}")


async def _send_without_token(address: str) -> grpc.aio.AioRpcError:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        message = Message(message_id="m-1", role=Role.ROLE_USER, parts=[Part(text="hi")])
        try:
            await stub.SendMessage(SendMessageRequest(message=message), timeout=10)
        except grpc.aio.AioRpcError as exc:
            return exc
    raise AssertionError("the hub answered a call without a token")


def test_serve_prints_the_grpc_address_and_every_worker_answers_there():
    port = free_port()
    redis_url = settings.REDIS_URL or os.environ.get(
        "HUB_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"
    )
    serve = subprocess.Popen(
        [*MANAGE, "a2a", "serve", "--workers", "2", "--no-demo", "--port", str(port)],
        env={**cli_environment(), "HUB_GRPC_PORT": "", "REDIS_URL": redis_url},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        lines = _lines_until(serve, "Ctrl-C stops the hub")
        address = f"127.0.0.1:{port + 1}"
        assert f"  and over gRPC at {address} (tenant: the agent's name)" in lines
        deadline = time.monotonic() + 60
        while len(owner_counts(children_of(serve.pid), sockets_on(port + 1, LISTEN))) < 2:
            assert time.monotonic() < deadline, "the two workers did not both listen for gRPC"
            time.sleep(0.2)

        refused = asyncio.run(_send_without_token(address))
        assert refused.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "Authorization: Bearer <token>" in (refused.details() or "")

        card = httpx.get(
            f"http://127.0.0.1:{port}/.well-known/agent-card.json", headers={"A2A-Version": "1.0"}
        ).json()
        assert {"url": address, "protocolBinding": "GRPC", "protocolVersion": "1.0"} in card[
            "supportedInterfaces"
        ]
    finally:
        serve.terminate()
        serve.wait(30)


def test_serve_with_grpc_off_serves_and_lists_no_grpc():
    port = free_port()
    serve = subprocess.Popen(
        [*MANAGE, "a2a", "serve", "--no-demo", "--port", str(port)],
        env={**cli_environment(), "HUB_GRPC_PORT": "off"},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        lines = _lines_until(serve, "Ctrl-C stops the hub")
        assert not [line for line in lines if "gRPC" in line]
        card = httpx.get(
            f"http://127.0.0.1:{port}/.well-known/agent-card.json", headers={"A2A-Version": "1.0"}
        ).json()
        assert "GRPC" not in {i["protocolBinding"] for i in card["supportedInterfaces"]}
        assert not sockets_on(port + 1, LISTEN)
    finally:
        serve.terminate()
        serve.wait(30)
