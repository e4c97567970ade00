"""`HubClient`, as an agent author uses it: two agents talking through a live hub."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from a2a.types.a2a_pb2 import TaskState

from a2a_core.asyncdb import db
from a2a_core.client.hub import HubClient, RequestFailed
from a2a_core.client.inbox import Delivery
from a2a_core.errors import ValidationFailed
from a2a_core.models import Delivery as DeliveryRow
from a2a_core.models import Escalation, Message
from a2a_core.services.escalations import escalation_answer
from tests.a2a_core.cli.helpers import a2a
from tests.a2a_core.protocol.helpers import eventually
from tests.factories import register

pytestmark = pytest.mark.live


@pytest.fixture
async def clients(hub):
    """`await clients(slug, inbox=False)` -> a HubClient for a newly registered agent."""
    made: list[HubClient] = []

    async def make(slug: str, *, inbox: bool = False, **kwargs: Any) -> HubClient:
        registration = await db(register, slug, inbox=inbox, **kwargs)
        client = HubClient(hub.url, registration.token, agent=slug)
        made.append(client)
        return client

    yield make
    for client in made:
        await client.close()

    async def gone() -> bool:
        from a2a_core.models import InboxSession

        return not await db(InboxSession.objects.exists)

    await eventually(gone)


def serve(client: HubClient, handle: Callable[[Delivery], Awaitable[None]]) -> asyncio.Task[None]:
    """Run an inbox agent: `handle` each delivery."""

    async def loop() -> None:
        async for delivery in client.inbox():
            await handle(delivery)

    return asyncio.get_running_loop().create_task(loop())


async def test_a_task_request_to_an_inbox_agent_comes_back_done(clients):
    lead, duc = await clients("lead"), await clients("duc", inbox=True)

    async def handle(delivery: Delivery) -> None:
        assert delivery.kind == "task_request" and delivery.sender == "lead"
        assert delivery.envelope["from"] == {"agentId": "lead"}
        await delivery.working("reading the spec")
        await delivery.artifact("login.py: 120 lines", name="diff")
        await delivery.complete(f"done: {delivery.envelope['payload']['title']}")

    agent = serve(duc, handle)
    task = await lead.send_task_request(
        "duc",
        "Build the login page",
        "OAuth + email",
        acceptance_criteria=["tests pass"],
        wait=True,
    )
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert task.status.message.parts[0].text == "done: Build the login page"
    assert task.artifacts[0].name == "diff"
    agent.cancel()


async def test_request_gets_the_response_and_times_out_without_one(clients):
    lead, ledger = await clients("lead"), await clients("ledger", inbox=True)
    answered: list[str] = []

    async def handle(delivery: Delivery) -> None:
        if delivery.envelope["payload"]["text"] == "plan of acme?":
            await delivery.respond(text="enterprise")
            answered.append(delivery.envelope["correlationId"])
        # anything else is left unanswered

    agent = serve(ledger, handle)
    assert await lead.request("ledger", "plan of acme?", within=10) == {"text": "enterprise"}
    with pytest.raises(RequestFailed, match="no answer from ledger before the deadline"):
        await lead.request("ledger", "plan of nobody?", within=1)
    assert len(answered) == 1
    agent.cancel()


async def test_a_bad_envelope_is_refused_before_it_leaves(clients):
    lead = await clients("lead")
    await clients("duc", inbox=True)
    with pytest.raises(ValidationFailed) as caught:
        await lead.send_task_request("duc", "", complexity="galactic")
    assert {p.field for p in caught.value.problems} == {"payload.title", "payload.complexity"}
    assert await db(Message.objects.count) == 0


async def test_broadcast_and_knowledge_share_report_where_they_went(clients):
    lead = await clients("lead", role="lead")
    for slug in ("ana", "bo"):
        await clients(slug, inbox=True, role="dev")
    sent = await lead.broadcast("role:dev", "freeze", "code freeze at 5pm")
    assert sorted(d["agent"] for d in sent["deliveries"]) == ["ana", "bo"]
    shared = await lead.share_knowledge(
        "flaky", relevant_to=["ana", "ghost"], discovery="test_x flakes"
    )
    assert ([d["agent"] for d in shared["deliveries"]], shared["unknown"]) == (["ana"], ["ghost"])


async def test_a_delivery_is_acknowledged_once_handled_and_sent_again_if_handling_failed(
    hub, clients
):
    lead, ana = await clients("lead"), await clients("ana", inbox=True)
    await lead.broadcast("agents:ana", "one", "first")
    await lead.broadcast("agents:ana", "two", "second")

    class Crash(Exception):
        pass

    seen: list[str] = []

    async def handle_until_it_crashes() -> None:
        async for delivery in ana.inbox():
            seen.append(delivery.envelope["payload"]["topic"])
            if delivery.envelope["payload"]["topic"] == "two":
                raise Crash  # the agent dies handling it: never acknowledged

    with pytest.raises(Crash):
        await handle_until_it_crashes()
    states = await db(
        lambda: list(DeliveryRow.objects.order_by("pk").values_list("state", flat=True))
    )
    assert seen == ["one", "two"] and states == ["acked", "delivered"]

    await ana.close()
    again = HubClient(hub.url, ana.token, agent="ana")
    async for delivery in again.inbox():
        assert (delivery.envelope["payload"]["topic"], delivery.attempt) == ("two", 2)
        break
    await again.close()


async def test_ask_human_waits_for_the_operators_answer(clients):
    lead, duc = await clients("lead"), await clients("duc", inbox=True)
    answers: list[str] = []

    async def handle(delivery: Delivery) -> None:
        if delivery.kind == "response":  # the human's answer
            answers.append(delivery.text)
            await delivery.complete("released")
        else:
            await delivery.ask_human("release on a Friday?", priority="urgent")

    agent = serve(duc, handle)
    task = await lead.send("duc", "release 2.0", wait=False)

    async def asked() -> Any:
        return await db(
            lambda: Escalation.objects.filter(task_id=task.id, status="pending").first()
        )

    escalation = await eventually(asked)
    assert (escalation.question, escalation.priority) == ("release on a Friday?", "urgent")
    await db(escalation_answer, escalation_id=escalation.pk, text="yes", actor_label="operator")

    async def released() -> Any:
        current = await lead.get_task("duc", task.id)
        return current if current.status.state == TaskState.TASK_STATE_COMPLETED else None

    await eventually(released)
    assert answers == ["yes"]
    agent.cancel()
    # The answer is the person's decision, as the log shows it (the command named them).
    [line] = [
        json.loads(line)
        for line in (await db(a2a, "log", "--json", "--type", "response")).splitlines()
        if json.loads(line)["policyDecision"]["reason"] == "answered_by_human"
    ]
    assert line["policyDecision"]["decidedBy"] == "operator"


async def test_discover_finds_peers_by_skill(clients):
    lead = await clients("lead")
    await clients(
        "rev", skills=[{"id": "code-review", "name": "Review", "description": "d", "tags": ["qa"]}]
    )
    found = await lead.discover(skill="code-review")
    assert [a["slug"] for a in found] == ["rev"]


REFUSED_CALL = """
import asyncio, json, sys
from a2a_core.client.hub import HubClient

async def main() -> None:
    async with HubClient(sys.argv[1], sys.argv[2], agent="beta") as hub:
        try:
            await hub.send("echo", "hello")
        except Exception as exc:
            print(json.dumps({"error": type(exc).__name__, "data": getattr(exc, "data", None)}))

asyncio.run(main())
"""


async def test_a_refusal_reaches_an_agent_authors_client_as_its_error_with_the_reason(hub):
    """In a process of its own, importing only the client, as an agent author's does: the
    hub's refusal is the SDK's error class for it, carrying the policy's reason."""
    import json
    import subprocess
    import sys

    from django.conf import settings

    from a2a_core.services.policy import policy_publish

    await db(
        policy_publish,
        document={"matrix": [{"caller": "beta", "target": "echo", "action": "deny"}]},
        reason="test",
        actor_label="test",
    )
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("beta")
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", REFUSED_CALL, hub.url, token],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=settings.BASE_DIR,
    )
    assert done.returncode == 0, done.stderr
    refused = json.loads(done.stdout)
    assert refused["error"] == "PolicyRejectedError"
    assert refused["data"]["reason"] == "denied_by_matrix"
