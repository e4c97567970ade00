"""Scaled mode: several worker processes behind one PostgreSQL and one Redis act as one hub."""

from __future__ import annotations

import asyncio

import httpx
import pytest
import redis
import websockets
from django.conf import settings
from django.db import connection

from a2a_core.asyncdb import db
from a2a_core.services.users import user_create
from tests.conftest import Worker
from tests.dashboard.test_live_security import PASSWORD, session_cookie, socket_url

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(
        connection.vendor != "postgresql",
        reason="scaled mode (PostgreSQL + Redis): covered by the suite's second run",
    ),
]


async def _route(url: str, token: str, text: str) -> None:
    async with httpx.AsyncClient(
        headers={"Authorization": f"Bearer {token}", "A2A-Version": "1.0"}
    ) as http:
        response = await http.post(
            f"{url}/a2a/echo/",
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendMessage",
                "params": {
                    "message": {
                        "messageId": text.replace(" ", "-"),
                        "role": "ROLE_USER",
                        "parts": [{"text": f"echo {text}"}],
                    }
                },
            },
        )
    assert response.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def _frame_with(dashboard: websockets.ClientConnection, text: str) -> str:
    frame = ""
    while text not in frame:
        frame = await asyncio.wait_for(dashboard.recv(), 10)
    return str(frame)


async def test_a_dashboard_on_one_worker_sees_traffic_routed_by_another(hub):
    await hub.endpoint_agent("echo")
    _, alpha = await hub.caller("alpha")
    await db(user_create, username="vera", password=PASSWORD, role="viewer")
    watched, routing = Worker().wait(), Worker().wait()
    try:
        cookie = await session_cookie(watched.url, "vera")
        async with websockets.connect(
            socket_url(watched.url), origin=watched.url, additional_headers={"Cookie": cookie}
        ) as dashboard:
            await asyncio.sleep(0.3)  # the page has joined the live updates
            await _route(routing.url, alpha, "routed by the other worker")
            frame = await _frame_with(dashboard, "routed by the other worker")
            assert "alpha" in frame and "echo" in frame
            # Redis forgets the scripts it was given when it restarts; the events still go.
            redis.Redis.from_url(settings.REDIS_URL).script_flush()
            await _route(routing.url, alpha, "after Redis forgot its scripts")
            await _frame_with(dashboard, "after Redis forgot its scripts")
    finally:
        watched.stop()
        routing.stop()


async def test_an_agents_limit_of_calls_at_once_holds_across_worker_processes(hub):
    """Two hub processes (as on two hosts), with HUB_SHARED_SLOTS on, share sloth's
    incomingConcurrent of 2: it never has more than two calls at once, and every call
    completes."""
    from a2a_core.services.policy import policy_publish

    await db(
        policy_publish,
        document={"agentLimits": {"sloth": {"incomingConcurrent": 2}}},
        reason="test",
        actor_label="test",
    )
    sloth, _, _ = await hub.endpoint_agent("sloth")
    _, alpha = await hub.caller("alpha")
    first, second = Worker(HUB_SHARED_SLOTS="true"), Worker(HUB_SHARED_SLOTS="true")
    try:
        first.wait(60), second.wait(60)
        async with httpx.AsyncClient(
            headers={"Authorization": f"Bearer {alpha}", "A2A-Version": "1.0"}, timeout=60
        ) as http:

            async def call(url: str, n: int) -> str:
                response = await http.post(
                    f"{url}/a2a/sloth/",
                    json={
                        "jsonrpc": "2.0",
                        "id": n,
                        "method": "SendMessage",
                        "params": {
                            "message": {
                                "messageId": f"slow-{n}",
                                "role": "ROLE_USER",
                                "parts": [{"text": "slow 1"}],
                            }
                        },
                    },
                )
                return str(response.json()["result"]["task"]["status"]["state"])

            states = await asyncio.gather(*(call((first, second)[n % 2].url, n) for n in range(8)))
    finally:
        first.stop()
        second.stop()
    assert states == ["TASK_STATE_COMPLETED"] * 8
    assert len(sloth.state.messages) == 8
    assert sloth.state.most_at_once == 2
