"""An agent's answer that is not valid A2A is the agent's failure: a clear error, a failed
task saying why, and a failure its breaker counts."""

from __future__ import annotations

import httpx
import pytest
from a2a.client import A2AClientError
from a2a.types.a2a_pb2 import ListTasksRequest, TaskState

from a2a_core.asyncdb import db
from a2a_core.services.policy import policy_publish
from tests.a2a_core.protocol.helpers import request, send
from tests.peers import PeerProcess, peer_python
from tests.servers import free_port

pytestmark = pytest.mark.live


@pytest.fixture
def fasta2a():
    """The card of a real fasta2a 2.1.1 server, running; it writes status timestamps without an offset."""
    port = free_port()
    python = peer_python("fasta2a", ["fasta2a==2.1.1", "uvicorn"])
    peer = PeerProcess(python, "fasta2a_agent.py", str(port), "fast").wait_port(port)
    yield httpx.get(f"http://127.0.0.1:{port}/.well-known/agent-card.json").json()
    peer.stop()


async def test_fasta2a_timestamps_without_offset_fail_the_task_and_open_the_breaker(
    hub, sdk, fasta2a
):
    await db(
        policy_publish,
        document={"breaker": {"failureThreshold": 2, "cooldownSeconds": 60}},
        reason="test",
    )
    await hub.register_card(fasta2a)
    _, token = await hub.caller("alpha")
    client = await sdk("fast", token)

    for _ in range(2):
        with pytest.raises(A2AClientError) as raised:
            await send(client, request("hello"))
        error = str(raised.value)
        assert "-32603" not in error
        assert "fast sent an answer that is not valid A2A: task.status.timestamp '" in error
        assert "' has no offset" in error

    listed = await client.list_tasks(ListTasksRequest())
    assert [t.status.state for t in listed.tasks] == [TaskState.TASK_STATE_FAILED] * 2
    reason = listed.tasks[0].status.message.parts[0].text
    assert reason.startswith("fast sent an answer that is not valid A2A: task.status.timestamp")

    # Two such failures reach the policy's threshold: the breaker is open.
    with pytest.raises(A2AClientError, match="-32055"):
        await send(client, request("hello again"))
