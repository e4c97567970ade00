"""Scaled mode: several worker processes behind one PostgreSQL and one Redis act as one hub."""

from __future__ import annotations

import asyncio

import httpx
import pytest
import websockets
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
            async with httpx.AsyncClient(
                headers={"Authorization": f"Bearer {alpha}", "A2A-Version": "1.0"}
            ) as http:
                response = await http.post(
                    f"{routing.url}/a2a/echo/",
                    json={
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "SendMessage",
                        "params": {
                            "message": {
                                "messageId": "scaled-1",
                                "role": "ROLE_USER",
                                "parts": [{"text": "echo routed by the other worker"}],
                            }
                        },
                    },
                )
            assert response.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
            frame = ""
            while "routed by the other worker" not in frame:
                frame = await asyncio.wait_for(dashboard.recv(), 10)
        assert "alpha" in frame and "echo" in frame
    finally:
        watched.stop()
        routing.stop()
