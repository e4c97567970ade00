"""The example inbox agent in examples/, run as its author would run it."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest
from a2a.types.a2a_pb2 import TaskState
from google.protobuf.json_format import MessageToDict

from a2a_core.asyncdb import db
from a2a_core.client.hub import HubClient
from a2a_core.models import Agent
from a2a_core.services.agents import agent_register
from tests.a2a_core.protocol.helpers import eventually
from tests.factories import register

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parents[3]


async def test_the_example_reviewer_answers_reviews_and_requests(hub):
    card = json.loads((ROOT / "examples" / "reviewer-card.json").read_text())
    reviewer = await db(agent_register, card=card, delivery_mode="inbox")
    lead_token = (await db(register, "lead")).token
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(ROOT / "examples" / "reviewer_agent.py"),
        env={**os.environ, "HUB_URL": hub.url, "HUB_TOKEN": reviewer.token},
        stdout=asyncio.subprocess.PIPE,
    )
    try:

        async def online() -> bool:
            return await db(lambda: Agent.objects.get(slug="reviewer").status) == "online"

        await eventually(online, within=20)
        async with HubClient(hub.url, lead_token, agent="lead") as lead:
            task = await lead.send_review_request(
                "reviewer", "Login page", ["app/login.py", "tests/test_login.py"], wait=True
            )
            assert task.status.state == TaskState.TASK_STATE_COMPLETED
            verdict = MessageToDict(task.artifacts[0])["parts"][0]["data"]
            assert verdict["kind"] == "review_response"
            assert verdict["payload"]["verdict"] == "changes_requested"
            assert [c["file"] for c in verdict["payload"]["concerns"]] == ["app/login.py"]
            answer = await lead.request("reviewer", "are you there?", within=10)
            assert answer == {"text": "the reviewer got: are you there?"}
    finally:
        process.terminate()
        out, _ = await asyncio.wait_for(process.communicate(), 10)
    assert "<- review_request from lead" in out.decode()
