"""A worker of `a2a serve --workers 2` killed with SIGKILL mid-traffic, on PostgreSQL + Redis.

1,000 messages go to a real a2a-sdk endpoint agent and to an inbox agent through the hub as
an operator runs it (`manage.py a2a serve --workers 2 --no-demo`); the worker holding the
inbox agent's websocket is killed a third of the way through. Afterwards the hub answers
without a restart, every acknowledged message is stored exactly once (also when the caller
sends again what got no answer), no task is left open past its deadline and grace, every
delivery reaches the inbox agent, and every task the agent completed is completed at the hub.

And calls in flight to an agent that answers with a Message and keeps no task: those the
killed worker had delivered are recorded as of unknown outcome (never "send it again"), and a
blocking retry of each gets a final answer, with no work done twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets
from django.db import connection

from a2a_core.asyncdb import db
from a2a_core.models import ACTIVE_STATES, Delivery, Message, Task
from a2a_core.models import TaskState as State
from a2a_core.services.agents import agent_register
from a2a_core.services.policy import policy_publish
from tests.a2a_core.cli.test_serve_supervisor import Scaled
from tests.a2a_core.cli.test_serve_workers import ESTABLISHED, owner_counts, sockets_on
from tests.a2a_core.protocol.helpers import eventually
from tests.agents import ScriptedAgent
from tests.conftest import _close_database_connections
from tests.factories import register

pytestmark = [
    pytest.mark.live,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor != "postgresql",
        reason="scaled mode (PostgreSQL + Redis): covered by the suite's second run",
    ),
]

MESSAGES = 1000
AT_ONCE = 25
TIMEOUT_SECONDS = 5
GRACE_SECONDS = 2
FAST = {"HUB_ABANDONED_GRACE_SECONDS": str(GRACE_SECONDS), "HUB_INBOX_ACK_SECONDS": "3"}


def send_body(message_id: str, text: str, *, inbox: bool) -> dict[str, Any]:
    message = {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}
    params: dict[str, Any] = {"message": message}
    if inbox:  # queued for the inbox agent, answered at once
        params["configuration"] = {"returnImmediately": True}
    else:  # a short deadline, so the sweep's turn comes within the test
        message["metadata"] = {"a2aHub": {"timeoutSeconds": TIMEOUT_SECONDS}}
    return {"jsonrpc": "2.0", "id": message_id, "method": "SendMessage", "params": params}


def message_for(i: int) -> tuple[str, dict[str, Any]]:
    """Message i: every tenth to the inbox agent; of the others, every fourth takes the agent
    a moment, so that some are in flight whenever the worker dies."""
    message_id = f"m-{i}"
    if i % 10 == 0:
        return "duc", send_body(message_id, f"job {i}", inbox=True)
    text = "slow 0.3" if i % 4 == 1 else f"echo {i}"
    return "echo", send_body(message_id, text, inbox=False)


@pytest.fixture
def scaled(transactional_db: None, tmp_path: Path):
    hub = Scaled(tmp_path, **FAST)
    yield hub
    with contextlib.suppress(ProcessLookupError):
        os.killpg(hub.process.pid, signal.SIGKILL)
    hub.process.wait(10)
    _close_database_connections()


async def test_killing_a_worker_of_a2a_serve_loses_doubles_and_strands_nothing(scaled):
    agent = ScriptedAgent("echo")
    registration = await db(agent_register, card=agent.card_json)
    agent.start(hub_url=scaled.url, token=registration.token or "")
    try:
        caller = (await db(register, "alpha")).token
        duc = (await db(register, "duc", inbox=True)).token
        # Routing is under test, not the default limits.
        await db(
            policy_publish,
            document={"limits": {"perMinute": 100_000, "perHour": 1_000_000, "concurrent": 10_000}},
            reason="test: limits out of reach",
        )
        await _run(scaled, agent, caller or "", duc or "")
    finally:
        agent.stop()


async def _run(scaled: Scaled, agent: ScriptedAgent, caller: str, duc: str) -> None:
    workers = await asyncio.to_thread(scaled.listening_workers)
    ws_url = scaled.url.replace("http://", "ws://") + "/ws/agents/duc/"
    auth = {"Authorization": f"Bearer {duc}"}
    inbox = await websockets.connect(ws_url, additional_headers=auth)
    await inbox.recv()  # hello
    # The worker holding the inbox agent's websocket (the only connection so far) will die.
    [doomed] = owner_counts(workers, sockets_on(scaled.port, ESTABLISHED))
    before_kill: list[int] = []

    async def take_deliveries() -> None:  # never acknowledged: the survivor sends them again
        try:
            async for raw in inbox:
                frame = json.loads(raw)
                if frame["type"] == "delivery":
                    before_kill.append(frame["deliveryId"])
        except websockets.ConnectionClosed:
            pass

    reader = asyncio.get_running_loop().create_task(take_deliveries())
    headers = {"Authorization": f"Bearer {caller}", "A2A-Version": "1.0"}
    answered: dict[str, dict[str, Any]] = {}
    unanswered: list[int] = []
    third = asyncio.Event()
    gate = asyncio.Semaphore(AT_ONCE)

    async with httpx.AsyncClient(headers=headers, timeout=60) as http:

        async def one(i: int) -> None:
            slug, body = message_for(i)
            async with gate:
                try:
                    response = await http.post(f"{scaled.url}/a2a/{slug}/", json=body)
                except httpx.TransportError:  # its worker died: the call got no answer
                    unanswered.append(i)
                    return
            answered[body["id"]] = response.json()
            if len(answered) >= MESSAGES // 3:
                third.set()

        async def kill_midway() -> float:
            await third.wait()
            os.kill(doomed, signal.SIGKILL)
            killed = time.monotonic()
            # The hub answers, on a new connection each time, without anyone restarting it.
            async with httpx.AsyncClient(timeout=5) as probe:
                while time.monotonic() - killed < 60:
                    try:
                        response = await probe.get(
                            f"{scaled.url}/.well-known/agent-card.json",
                            headers={"Connection": "close"},
                        )
                        if response.status_code == 200:
                            return time.monotonic() - killed
                    except httpx.TransportError:
                        pass
                    await asyncio.sleep(0.02)
            return -1.0

        killer = asyncio.get_running_loop().create_task(kill_midway())
        await asyncio.gather(*(one(i) for i in range(MESSAGES)))
        answered_after = await killer
        print(f"\nthe hub answered {answered_after:.3f} s after the worker was killed")
        assert answered_after >= 0, f"the hub did not answer after the kill: {scaled.output}"
        assert f"worker {doomed} was killed by SIGKILL" in scaled.output

        # The caller sends again, unchanged, what got no answer: it is answered now.
        first_round = len(answered)
        for i in unanswered:
            slug, body = message_for(i)
            response = await http.post(f"{scaled.url}/a2a/{slug}/", json=body)
            answered[body["id"]] = response.json()
    await reader

    errors = {m: r["error"] for m, r in answered.items() if "result" not in r}
    print(
        f"{first_round} answered, {len(unanswered)} lost with the worker and sent again, "
        f"{len(before_kill)} inbox deliveries before the kill"
    )
    assert first_round >= MESSAGES // 3
    assert errors == {}

    # Every acknowledged message is stored once.
    stored = Counter(
        await db(
            lambda: list(
                Message.objects.filter(direction="request").values_list("message_id", flat=True)
            )
        )
    )
    assert [m for m in answered if stored[m] != 1] == []
    assert [m for m, n in stored.items() if n > 1] == []

    # The inbox agent, back on a worker that lives, gets every delivery and acknowledges it.
    await _drain_inbox(ws_url, auth)

    # No task of the endpoint agent stays open past its deadline and the grace period.
    async def settled() -> list[tuple[str, str, str, str]]:
        rows = await db(
            lambda: list(
                Task.objects.filter(target__slug="echo").values_list(
                    "pk", "state", "remote_task_id", "reason"
                )
            )
        )
        return [] if any(state in ACTIVE_STATES for _, state, _, _ in rows) else rows

    tasks = await eventually(settled, within=TIMEOUT_SECONDS + GRACE_SECONDS + 30)
    print(f"hub tasks: {dict(Counter(state for _, state, _, _ in tasks))}")
    assert len(tasks) == sum(1 for i in range(MESSAGES) if i % 10)

    # Every task the agent completed is completed at the hub.
    hub_states = {pk: state for pk, state, _, _ in tasks}
    reasons = {pk: reason for pk, _, _, reason in tasks}
    completed = await _completed_at_agent(agent.url)
    print(f"the agent completed {len(completed)} tasks")
    differ = {
        hub_task: (hub_states.get(hub_task), reasons.get(hub_task))
        for hub_task in completed
        if hub_states.get(hub_task) != "completed"
    }
    assert differ == {}, f"{len(differ)} tasks completed by the agent but not at the hub"


async def _drain_inbox(ws_url: str, auth: dict[str, str]) -> None:
    async def all_acked() -> bool:
        states = await db(lambda: set(Delivery.objects.values_list("state", flat=True)))
        return states == {"acked"}

    expected = await db(Delivery.objects.count)
    received: set[int] = set()
    async with websockets.connect(ws_url, additional_headers=auth) as again:
        hello = json.loads(await again.recv())
        assert hello["waiting"] == expected
        while len(received) < expected:
            frame = json.loads(await asyncio.wait_for(again.recv(), 15))
            if frame["type"] == "delivery":
                received.add(frame["deliveryId"])
                await again.send(json.dumps({"type": "ack", "deliveryId": frame["deliveryId"]}))
        await eventually(all_acked)
    assert expected == sum(1 for i in range(MESSAGES) if i % 10 == 0)


async def _completed_at_agent(url: str) -> set[str]:
    """The hub task ids of the tasks the agent itself holds as completed (its ListTasks)."""
    completed: set[str] = set()
    token = ""
    async with httpx.AsyncClient(timeout=30, headers={"A2A-Version": "1.0"}) as http:
        while True:
            params: dict[str, Any] = {"pageSize": 100, "status": "TASK_STATE_COMPLETED"}
            if token:
                params["pageToken"] = token
            response = await http.post(
                f"{url}/",
                json={"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": params},
            )
            page = response.json()["result"]
            for task in page.get("tasks", []):
                [first] = task["history"][:1]
                completed.add(first["metadata"]["a2aHub"]["taskId"])
            token = page.get("nextPageToken", "")
            if not token:
                return completed


IN_FLIGHT = 8
FINAL = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"}


def slow_reply(i: int) -> dict[str, Any]:
    """A blocking call the agent answers with a Message (no task) 4 s after it receives it."""
    message = {
        "messageId": f"r-{i}",
        "role": "ROLE_USER",
        "parts": [{"text": "slowreply 4"}],
        "metadata": {"a2aHub": {"timeoutSeconds": 8}},
    }
    return {"jsonrpc": "2.0", "id": i, "method": "SendMessage", "params": {"message": message}}


async def test_calls_a_killed_worker_delivered_to_an_agent_keeping_no_task_are_of_unknown_outcome(
    scaled,
):
    agent = ScriptedAgent("replier")
    registration = await db(agent_register, card=agent.card_json)
    agent.start(hub_url=scaled.url, token=registration.token or "")
    try:
        caller = (await db(register, "alpha")).token or ""
        await _kill_with_replies_in_flight(scaled, agent, caller)
    finally:
        agent.stop()


async def _kill_with_replies_in_flight(scaled: Scaled, agent: ScriptedAgent, caller: str) -> None:
    workers = await asyncio.to_thread(scaled.listening_workers)
    url = f"{scaled.url}/a2a/replier/"
    headers = {"Authorization": f"Bearer {caller}", "A2A-Version": "1.0"}
    # One connection a call, so that both workers hold some of them.
    clients = [httpx.AsyncClient(headers=headers, timeout=60) for _ in range(IN_FLIGHT)]
    try:
        calls = [
            asyncio.ensure_future(client.post(url, json=slow_reply(i)))
            for i, client in enumerate(clients)
        ]

        async def all_received() -> bool:
            return len(agent.state.messages) == IN_FLIGHT

        await eventually(all_received, within=30)
        # The agent has every call and answers each 4 s later: kill the worker holding most.
        held = owner_counts(workers, sockets_on(scaled.port, ESTABLISHED))
        print(f"\nconnections per worker: {dict(held)}")
        [(doomed, _)] = held.most_common(1)
        os.kill(doomed, signal.SIGKILL)
        results = await asyncio.gather(*calls, return_exceptions=True)
    finally:
        for client in clients:
            await client.aclose()
    lost = [i for i, r in enumerate(results) if isinstance(r, httpx.TransportError)]
    answered = [r.json()["result"] for r in results if isinstance(r, httpx.Response)]
    print(f"\n{len(lost)} calls lost with worker {doomed}, {len(answered)} answered")
    assert lost, f"no call was lost with the killed worker: {results}"
    assert [a["message"]["parts"] for a in answered] == [[{"text": "done"}]] * len(answered)

    # The caller sends each lost call again, unchanged and blocking: each gets a final state
    # (or the error for an answer the hub cannot give yet), never a task still under way.
    async with httpx.AsyncClient(headers=headers, timeout=90) as http:
        retries = await asyncio.gather(*(http.post(url, json=slow_reply(i)) for i in lost))
    for retry in (r.json() for r in retries):
        if "error" in retry:
            assert retry["error"]["code"] == -32056, retry
            continue
        status = retry["result"]["task"]["status"]
        assert status["state"] in FINAL, status
        assert status["state"] == "TASK_STATE_FAILED", status
        said = status["message"]["parts"][0]["text"]
        assert "whether it received this is unknown" in said, said
        assert "send it again" not in said
        assert status["message"]["metadata"] == {"a2aHub": {"delivery": "unknown"}}

    # As the hub records them: of unknown outcome, none of them "never received".
    rows = await db(
        lambda: dict(
            Message.objects.filter(
                direction="request", message_id__in=[f"r-{i}" for i in lost]
            ).values_list("message_id", "task__state")
        )
    )
    assert rows == {f"r-{i}": State.FAILED for i in lost}
    reasons = await db(
        lambda: list(
            Task.objects.filter(messages__message_id__in=[f"r-{i}" for i in lost]).values_list(
                "reason", flat=True
            )
        )
    )
    assert all("unknown" in reason and "send it again" not in reason for reason in reasons)

    # The hub did no work twice: the agent received each call once.
    received = Counter(m["messageId"] for m in agent.state.messages)
    assert received == Counter({f"r-{i}": 1 for i in range(IN_FLIGHT)})
