"""A worker killed with SIGKILL mid-traffic: nothing acknowledged is lost or doubled.

Two hub worker processes share PostgreSQL and Redis (the scaled deployment). 1,000 messages
are routed through both while one of them is killed. Afterwards every message a caller got an
answer for is stored exactly once, no task is left submitted or working (those the dead worker
was delivering fail with the reason), and an inbox agent that was connected to the dead worker
gets its unacknowledged deliveries from the survivor.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import uuid
from collections import Counter
from typing import Any

import httpx
import pytest
import websockets
from django.db import connection

from a2a_core.asyncdb import db
from a2a_core.models import ACTIVE_STATES, Delivery, Message, Task
from a2a_core.services.policy import policy_publish
from tests.a2a_core.protocol.helpers import eventually
from tests.conftest import Worker
from tests.factories import register

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(
        connection.vendor != "postgresql",
        reason="scaled mode (PostgreSQL + Redis): covered by the suite's second run",
    ),
]

MESSAGES = 1000
INBOX_MESSAGES = 40
FAST = {"HUB_ABANDONED_GRACE_SECONDS": "2", "HUB_INBOX_ACK_SECONDS": "3"}


def send_body(message_id: str, text: str, *, inbox: bool = False) -> dict[str, Any]:
    message = {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}
    params: dict[str, Any] = {"message": message}
    if inbox:  # queued for the inbox agent, answered at once
        params["configuration"] = {"returnImmediately": True}
    else:  # a short deadline, so what the dead worker was delivering fails soon
        message["metadata"] = {"a2aHub": {"timeoutSeconds": 3}}
    return {"jsonrpc": "2.0", "id": message_id, "method": "SendMessage", "params": params}


async def test_killing_a_worker_loses_and_doubles_nothing(hub):
    await hub.endpoint_agent("echo")
    _, caller = await hub.caller("alpha")
    # Routing is under test, not the default limits: with the inbox's 40 tasks open, the
    # 50-tasks-in-flight limit refused so many calls that the count acknowledged depended on
    # how fast the dead worker's tasks were failed.
    await db(
        policy_publish,
        document={"limits": {"perMinute": 100_000, "perHour": 1_000_000, "concurrent": 10_000}},
        reason="test: limits out of reach",
    )
    duc = await db(register, "duc", inbox=True)
    doomed, survivor = Worker(**FAST).wait(), Worker(**FAST).wait()
    try:
        await _route_kill_and_check(doomed, survivor, caller, duc.token)
    finally:
        for worker in (doomed, survivor):
            worker.stop()


async def _route_kill_and_check(doomed: Worker, survivor: Worker, caller: str, duc: str) -> None:
    headers = {"Authorization": f"Bearer {caller}", "A2A-Version": "1.0"}
    acknowledged: list[str] = []
    sent = 0
    third_sent = asyncio.Event()

    # The inbox agent is connected to the worker that will die, and leaves deliveries unacked.
    inbox = await websockets.connect(
        doomed.url.replace("http://", "ws://") + "/ws/agents/duc/",
        additional_headers={"Authorization": f"Bearer {duc}"},
    )
    await inbox.recv()  # hello

    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        for i in range(INBOX_MESSAGES):
            response = await http.post(
                f"{survivor.url}/a2a/duc/",
                json=send_body(f"inbox-{i}", f"job {i}", inbox=True),
            )
            assert "result" in response.json()

        async def one(i: int) -> None:
            nonlocal sent
            worker = doomed if i % 2 else survivor
            message_id = f"m-{i}-{uuid.uuid4().hex[:6]}"
            try:
                response = await http.post(
                    f"{worker.url}/a2a/echo/", json=send_body(message_id, f"echo {i}")
                )
            except httpx.TransportError:
                return  # the worker died: this call got no answer
            sent += 1
            if sent >= MESSAGES // 3:
                third_sent.set()
            if "result" in response.json():
                acknowledged.append(message_id)

        async def kill_midway() -> None:
            await third_sent.wait()
            os.kill(doomed.process.pid, signal.SIGKILL)

        killer = asyncio.get_running_loop().create_task(kill_midway())
        for start in range(0, MESSAGES, 25):
            await asyncio.gather(*(one(i) for i in range(start, start + 25)))
        await killer
    doomed.process.wait(10)

    # The inbox agent reconnects to the survivor and gets everything it had not acknowledged.
    await inbox.close()
    async with websockets.connect(
        survivor.url.replace("http://", "ws://") + "/ws/agents/duc/",
        additional_headers={"Authorization": f"Bearer {duc}"},
    ) as again:
        hello = json.loads(await again.recv())
        assert hello["waiting"] == INBOX_MESSAGES
        received: list[int] = []
        while len(received) < INBOX_MESSAGES:
            frame = json.loads(await asyncio.wait_for(again.recv(), 15))
            if frame["type"] == "delivery":
                received.append(frame["deliveryId"])
                await again.send(json.dumps({"type": "ack", "deliveryId": frame["deliveryId"]}))
        assert len(set(received)) == INBOX_MESSAGES

        async def all_acked() -> bool:
            states = await db(lambda: set(Delivery.objects.values_list("state", flat=True)))
            return states == {"acked"}

        await eventually(all_acked)

    assert len(acknowledged) > MESSAGES // 3
    stored = Counter(
        await db(
            lambda: list(
                Message.objects.filter(
                    direction="request", message_id__startswith="m-"
                ).values_list("message_id", flat=True)
            )
        )
    )
    assert [m for m in acknowledged if stored[m] != 1] == []
    assert [m for m, n in stored.items() if n > 1] == []

    async def settled() -> list[tuple[str, str, str]]:
        rows = await db(
            lambda: list(
                Task.objects.filter(target__slug="echo").values_list("pk", "state", "reason")
            )
        )
        return [] if any(state in ACTIVE_STATES for _, state, _ in rows) else rows

    tasks = await eventually(settled, within=30)
    states = Counter(state for _, state, _ in tasks)
    assert set(states) <= {"completed", "failed"}, states
    assert all(reason for _, state, reason in tasks if state == "failed")
