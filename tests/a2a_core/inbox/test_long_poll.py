"""The long-poll fallback: the same deliveries and frames over plain HTTP."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from a2a.types.a2a_pb2 import TaskState

from a2a_core.asyncdb import db
from a2a_core.models import Agent, Delivery
from tests.a2a_core.inbox.test_inbox_agents import inbox_agent
from tests.a2a_core.protocol.helpers import request, send

pytestmark = pytest.mark.live


async def test_an_agent_polls_for_work_and_answers_over_http(hub, sdk):
    _, duc = await inbox_agent("duc")
    _, alpha = await hub.caller("alpha")
    client = await sdk("duc", alpha)
    async with httpx.AsyncClient(
        base_url=hub.url, headers={"Authorization": f"Bearer {duc}"}, timeout=30
    ) as http:
        empty = await http.get("/inbox/duc/", params={"wait": 0})
        assert empty.json() == {"deliveries": []}
        assert await db(lambda: Agent.objects.get(slug="duc").status) == "online"

        poll = asyncio.create_task(http.get("/inbox/duc/", params={"wait": 20}))
        await asyncio.sleep(0.2)  # the poll is waiting when the work arrives
        call = asyncio.create_task(send(client, request("translate: hello")))
        [delivery] = (await poll).json()["deliveries"]
        assert delivery["message"]["parts"] == [{"text": "translate: hello"}]

        results = (
            await http.post(
                "/inbox/duc/",
                json={
                    "frames": [
                        {"type": "ack", "deliveryId": delivery["deliveryId"], "ref": 1},
                        {
                            "type": "status",
                            "taskId": delivery["taskId"],
                            "state": "completed",
                            "text": "bonjour",
                            "ref": 2,
                        },
                        {
                            "type": "status",
                            "taskId": delivery["taskId"],
                            "state": "working",
                            "ref": 3,
                        },
                    ]
                },
            )
        ).json()["results"]
        assert [(r["ref"], r["type"]) for r in results] == [(1, "ok"), (2, "ok"), (3, "error")]
        assert results[2]["code"] == "illegal_transition"
        task = await call
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert task.status.message.parts[0].text == "bonjour"
        assert await db(lambda: list(Delivery.objects.values_list("state", flat=True))) == ["acked"]


async def test_long_poll_refuses_bad_requests_with_http_errors(hub):
    _, duc = await inbox_agent("duc")
    _, eve = await inbox_agent("eve")
    async with httpx.AsyncClient(base_url=hub.url, timeout=10) as http:
        anonymous = await http.get("/inbox/duc/", params={"wait": 0})
        assert anonymous.status_code == 401 and "www-authenticate" in anonymous.headers
        foreign = await http.get(
            "/inbox/duc/", params={"wait": 0}, headers={"Authorization": f"Bearer {eve}"}
        )
        assert (foreign.status_code, foreign.json()["error"]["code"]) == (403, "permission_denied")
        mine = {"Authorization": f"Bearer {duc}"}
        bad_wait = await http.get("/inbox/duc/", params={"wait": 99}, headers=mine)
        assert (
            bad_wait.status_code == 400 and bad_wait.json()["error"]["errors"][0]["field"] == "wait"
        )
        malformed = await http.post("/inbox/duc/", content=b"{oops", headers=mine)
        assert (
            malformed.status_code == 400
            and malformed.json()["error"]["message"] == "malformed body"
        )
        huge = await http.post("/inbox/duc/", content=b"x" * 2_000_000, headers=mine)
        assert huge.status_code == 413
        answer = await http.post("/inbox/duc/", json={"type": "ack", "deliveryId": 5}, headers=mine)
        assert answer.json()["code"] == "not_found"
