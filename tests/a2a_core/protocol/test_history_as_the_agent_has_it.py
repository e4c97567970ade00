"""A task's history at the hub is the agent's: the same messages, in the same order, whether
the task waits for input, failed or completed (compared with the agent's own GetTask)."""

from __future__ import annotations

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import GetTaskRequest, TaskState

from tests.a2a_core.protocol.helpers import request, send

pytestmark = pytest.mark.live


def conversation(task) -> list[tuple[int, str]]:
    return [(m.role, " ".join(p.text for p in m.parts)) for m in task.history]


async def test_the_history_of_a_question_a_failure_and_an_answer_is_the_agents(hub, sdk):
    agent, _, _ = await hub.endpoint_agent("asker")
    _, token = await hub.caller("alpha")
    through_hub = await sdk("asker", token)
    async with httpx.AsyncClient(timeout=30) as http:
        direct = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(agent.card)
        pairs = []
        for client in (through_hub, direct):
            asked = await send(client, request("ask which colour?"))
            assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            waiting = await client.get_task(GetTaskRequest(id=asked.id))
            done = await send(
                client, request("blue", task_id=asked.id, context_id=asked.context_id)
            )
            finished = await client.get_task(GetTaskRequest(id=done.id))
            failed = await send(client, request("fail it broke"))
            pairs.append(
                [
                    conversation(asked),
                    conversation(waiting),
                    conversation(finished),
                    conversation(failed),
                    conversation(await client.get_task(GetTaskRequest(id=failed.id))),
                ]
            )
    hub_view, agent_view = pairs
    assert hub_view == agent_view
    # The question itself is in the history once the task has moved on, as the agent has it.
    assert any("which colour?" in text for _, text in agent_view[2])
