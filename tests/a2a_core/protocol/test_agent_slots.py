"""An endpoint agent's limit of calls at once (policy `incomingConcurrent`): calls over it wait
in the hub, in order, within their timeout; a canceled one is never sent."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from a2a.types.a2a_pb2 import CancelTaskRequest, GetTaskRequest, TaskState

from a2a_core.asyncdb import db
from a2a_core.services.policy import policy_publish
from tests.a2a_core.protocol.helpers import eventually, request, send, stored_task
from tests.a2a_core.test_metrics import scrape, value

pytestmark = pytest.mark.live


async def limit(slug: str, calls: int) -> None:
    document: dict[str, Any] = {"agentLimits": {slug: {"incomingConcurrent": calls}}}
    await db(policy_publish, document=document, reason="test", actor_label="test")


async def test_calls_over_the_limit_wait_in_the_hub_and_all_complete(hub, sdk):
    await limit("sloth", 2)
    sloth, _, _ = await hub.endpoint_agent("sloth")
    _, token = await hub.caller("alpha")
    client = await sdk("sloth", token)

    # Each call holds its slot for 2 s: the three that wait stay waiting long enough to be
    # seen on a busy machine (the scrape itself takes its time).
    calls = [asyncio.create_task(send(client, request("slow 2"))) for i in range(5)]

    async def three_waiting() -> bool:
        _, samples = await scrape(hub.url)
        return value(samples, "a2a_call_queue_size", target="sloth") == 3

    await eventually(three_waiting)
    tasks = await asyncio.gather(*calls)
    assert [t.status.state for t in tasks] == [TaskState.TASK_STATE_COMPLETED] * 5
    assert sloth.state.most_at_once == 2
    assert len(sloth.state.messages) == 5
    for task in tasks:
        assert (await stored_task(task.id)).state == "completed"
    _, samples = await scrape(hub.url)
    assert value(samples, "a2a_call_queue_size", target="sloth") == 0


async def test_without_a_limit_every_call_reaches_the_agent_at_once(hub, sdk):
    await db(
        policy_publish,
        document={"limits": {"incomingConcurrent": None}},
        reason="test",
        actor_label="test",
    )
    sloth, _, _ = await hub.endpoint_agent("sloth")
    _, token = await hub.caller("alpha")
    client = await sdk("sloth", token)
    # Long enough for all twelve to arrive while the first is still there, on a busy machine.
    await asyncio.gather(*(send(client, request("slow 1.5")) for i in range(12)))
    assert sloth.state.most_at_once == 12


@pytest.fixture
async def busy(hub, sdk):
    """sloth, limited to one call at once, busy with a call of 1.5 s: (agent, client, call)."""
    await limit("sloth", 1)
    sloth, _, _ = await hub.endpoint_agent("sloth")
    _, token = await hub.caller("alpha")
    client = await sdk("sloth", token)
    first = asyncio.create_task(send(client, request("slow 1.5")))
    await eventually(lambda: asyncio.sleep(0, len(sloth.state.messages) == 1))
    return sloth, client, first


async def test_a_call_that_gets_no_slot_in_time_fails_saying_why_and_is_never_sent(busy):
    sloth, client, first = busy
    second = await send(client, request("echo late", metadata={"a2aHub": {"timeoutSeconds": 0.5}}))

    why = (
        "sloth was busy with 1 call (its limit, incomingConcurrent: 1) and none ended "
        "within 0.5 s; this call was not sent"
    )
    assert second.status.state == TaskState.TASK_STATE_FAILED
    assert second.status.message.parts[0].text == why
    assert (await stored_task(second.id)).reason == why
    assert (await first).status.state == TaskState.TASK_STATE_COMPLETED
    assert [m["parts"][0]["text"] for m in sloth.state.messages] == ["slow 1.5"]


async def test_canceling_a_call_that_waits_for_a_slot_means_it_is_never_sent(busy):
    sloth, client, first = busy
    waiting = await send(client, request("echo never", return_immediately=True))

    canceled = await client.cancel_task(CancelTaskRequest(id=waiting.id))

    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    assert (await first).status.state == TaskState.TASK_STATE_COMPLETED
    await asyncio.sleep(0.3)  # time the withdrawn call would have had to reach the agent
    assert [m["parts"][0]["text"] for m in sloth.state.messages] == ["slow 1.5"]
    again = await client.get_task(GetTaskRequest(id=waiting.id))
    assert again.status.state == TaskState.TASK_STATE_CANCELED
