"""A real delegation chain through the live hub, drawn on the task page."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest
from a2a.types.a2a_pb2 import TaskState

from a2a_core.asyncdb import db
from a2a_core.services.users import user_create
from tests.a2a_core.protocol.helpers import request, send, stored_task
from tests.dashboard.test_live_security import log_in

pytestmark = pytest.mark.live

PASSWORD = "a-long-test-password-2026"


@asynccontextmanager
async def logged_in(hub_url: str, role: str) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client logged in through the login form as a new user with `role`."""
    await db(user_create, username=role, password=PASSWORD, role=role)
    async with httpx.AsyncClient(base_url=hub_url) as http:
        await log_in(http, role)
        yield http


async def test_a_three_level_chain_is_drawn_with_a_node_per_task_its_states_and_edges(hub, sdk):
    await hub.endpoint_agent("baron")
    await hub.endpoint_agent("duc")
    await hub.endpoint_agent("marie")
    _, token = await hub.caller("orchestrator")

    answer = await send(
        await sdk("baron", token), request("delegate duc delegate marie fail out of ink")
    )

    assert answer.status.state == TaskState.TASK_STATE_COMPLETED
    root = await stored_task(answer.id)
    child = await db(lambda: root.children.get())
    grandchild = await db(lambda: child.children.get())
    async with logged_in(hub.url, "viewer") as http:
        page = (await http.get(f"/tasks/{child.pk}/")).text

    svg = page[page.index('<svg class="chain"') : page.rindex("</svg>")]
    nodes = dict(re.findall(r'data-task="([^"]+)" data-state="([a-z-]+)"', svg))
    assert nodes == {root.pk: "completed", child.pk: "completed", grandchild.pk: "failed"}
    edges = re.findall(r'data-parent="([^"]+)" data-child="([^"]+)"', svg)
    assert sorted(edges) == sorted([(root.pk, child.pk), (child.pk, grandchild.pk)])
    labels = re.findall(r'<text class="label"[^>]*>([^<]+)</text>', svg)
    assert sorted(labels) == ["baron → duc", "duc → marie", "orchestrator → baron"]
    assert re.search(rf'class="node completed current" href="/tasks/{child.pk}/"', svg)
    # The failure reached the grandchild's page as its reason and its timeline.
    async with logged_in(hub.url, "operator") as http:
        failed = (await http.get(f"/tasks/{grandchild.pk}/")).text
    assert "out of ink" in failed and '<span class="badge failed">failed</span>' in failed
