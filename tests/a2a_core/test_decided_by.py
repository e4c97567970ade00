"""Every decision shows who made it, wherever decisions appear: the person who decided on a held
message, or the policy version that decided automatically and the person who published it.
Through the real interfaces: the live hub, a2a-sdk agents and clients, the dashboard's pages
over HTTP, the JSONL export, `a2a log`, and the spans a hub worker exports over OTLP."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest
from a2a.client import A2AClientError
from a2a.types.a2a_pb2 import GetTaskRequest, TaskState

from a2a_core.asyncdb import db
from a2a_core.models import Escalation, Message
from a2a_core.services.escalations import escalation_approve
from a2a_core.services.policy import policy_publish
from a2a_core.services.users import user_create
from tests.a2a_core.cli.helpers import a2a
from tests.a2a_core.protocol.helpers import eventually, request, send
from tests.a2a_core.test_tracing import (  # noqa: F401 (fixtures)
    idle_hub,
    receiver,
    send_message,
    start_agent,
)
from tests.conftest import Worker
from tests.dashboard.test_live_security import PASSWORD, log_in

pytestmark = pytest.mark.live

# alpha's calls to echo wait for a human; to beta they go through; to gamma they are refused.
POLICY = {
    "matrix": [
        {"caller": "alpha", "target": "echo", "action": "approve"},
        {"caller": "alpha", "target": "gamma", "action": "deny"},
    ]
}


async def people() -> tuple[Any, Any]:
    """alice, an admin who publishes the policy (v1), and bob, an operator who decides."""
    alice = await db(user_create, username="alice", password=PASSWORD, role="admin")
    bob = await db(user_create, username="bob", password=PASSWORD, role="operator")
    await db(policy_publish, document=POLICY, reason="echo needs a human", actor=alice)
    return alice, bob


async def shown(hub_url: str, task_id: str) -> dict[str, str]:
    """The feed, the audit list, the task page and the JSONL export, as a viewer gets them."""
    await db(user_create, username="viewer", password=PASSWORD, role="viewer")
    async with httpx.AsyncClient(base_url=hub_url) as http:
        await log_in(http, "viewer")
        return {
            page: (await http.get(url)).text
            for page, url in {
                "feed": "/traffic/",
                "audit": "/audit/",
                "task": f"/tasks/{task_id}/",
                "export": "/audit/export.jsonl",
            }.items()
        }


def decider_in(html: str, message_pk: int) -> list[str]:
    """Who decided, as drawn in the rows of message `message_pk` (feed, audit and task rows)."""
    rows = re.findall(
        rf'data-message="{message_pk}".*?(?=data-message="|</tbody>|</ol>|\Z)', html, re.S
    )
    return [who for row in rows for who in re.findall(r'class="decider"[^>]*>· ([^<]+)<', row)]


def exported(export: str, message_id: str) -> dict[str, Any]:
    """The exported decision of the message with `message_id`."""
    [line] = [
        json.loads(line)
        for line in export.splitlines()
        if json.loads(line)["messageId"] == message_id
    ]
    return line["policyDecision"]


async def test_a_message_a_named_user_approved_shows_that_user_wherever_it_appears(hub, sdk):
    _, bob = await people()
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client = await sdk("echo", token)
    held = await send(client, request("echo please", message_id="held-1"))
    assert held.status.state == TaskState.TASK_STATE_AUTH_REQUIRED
    escalation = await db(lambda: Escalation.objects.get(task_id=held.id))

    await db(escalation_approve, escalation_id=escalation.pk, actor=bob)

    async def completed() -> bool:
        task = await client.get_task(GetTaskRequest(id=held.id))
        return task.status.state == TaskState.TASK_STATE_COMPLETED

    await eventually(completed)
    message = await db(lambda: Message.objects.get(message_id="held-1"))
    assert message.decision_reason == "approved_by_human"
    pages = await shown(hub.url, held.id)
    assert decider_in(pages["feed"], message.pk) == ["bob"]
    assert decider_in(pages["audit"], message.pk) == ["bob"]
    assert decider_in(pages["task"], message.pk) == ["bob"]
    decision = exported(pages["export"], "held-1")
    assert (decision["decidedBy"], decision["policyVersion"]) == ("bob", 1)
    [line] = [line for line in (await db(a2a, "log")).splitlines() if "echo please" in line]
    assert re.search(r"delivered \(approved by bob at [^)]+\)\s+bob\s", line)
    as_json = [json.loads(line) for line in (await db(a2a, "log", "--json")).splitlines()]
    assert [d["policyDecision"]["decidedBy"] for d in as_json] == ["bob"]


async def test_an_automatic_decision_shows_the_policy_version_and_its_author(hub, sdk):
    await people()
    await hub.endpoint_agent("beta")
    await hub.endpoint_agent("gamma")
    _, token = await hub.caller("alpha")
    delivered = await send(await sdk("beta", token), request("echo hi", message_id="auto-1"))
    with pytest.raises(A2AClientError, match="-32053"):
        await send(await sdk("gamma", token), request("echo no", message_id="auto-2"))
    ok, refused = await db(
        lambda: list(Message.objects.filter(message_id__startswith="auto-").order_by("pk"))
    )
    assert (ok.decision_policy_version, refused.decision_policy_version) == (1, 1)

    pages = await shown(hub.url, delivered.id)
    for message in (ok, refused):
        assert decider_in(pages["feed"], message.pk) == ["policy v1 by alice"]
        assert decider_in(pages["audit"], message.pk) == ["policy v1 by alice"]
    assert decider_in(pages["task"], ok.pk) == ["policy v1 by alice"]
    for message_id in ("auto-1", "auto-2"):
        decision = exported(pages["export"], message_id)
        assert (decision["decidedBy"], decision["policyVersion"]) == ("policy v1 by alice", 1)
    lines = (await db(a2a, "log")).splitlines()
    assert lines[0].split()[5:7] == ["DECIDED", "BY"]
    assert [re.search(r"policy v1 by alice", line) is not None for line in lines[1:]] == [
        True,
        True,
    ]


async def test_the_decision_spans_name_the_policy_version_s_author_or_the_human(
    idle_hub,  # noqa: F811 (the approved message is delivered by the worker, which traces)
    receiver,  # noqa: F811
):
    hub = idle_hub
    _, bob = await people()
    worker = Worker(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url, OTEL_BSP_SCHEDULE_DELAY="50").wait()
    try:
        echo = await start_agent(hub, "echo", worker.url)
        await start_agent(hub, "beta", worker.url)
        await start_agent(hub, "gamma", worker.url)
        _, token = await hub.caller("alpha")
        async with httpx.AsyncClient(base_url=worker.url, timeout=30) as http:
            for target, text, message_id in (
                ("beta", "echo auto", "span-1"),
                ("gamma", "echo refused", "span-2"),
                ("echo", "echo held", "span-3"),
            ):
                await http.post(
                    f"/a2a/{target}/", **send_message(token, text, message_id=message_id)
                )
        escalation = await db(lambda: Escalation.objects.get(message__message_id="span-3"))
        await db(escalation_approve, escalation_id=escalation.pk, actor=bob)

        def spans(name: str) -> list[dict[str, Any]]:
            return [s for s in receiver.spans if s["name"] == name]

        async def all_exported() -> bool:
            return bool(echo.state.messages and len(spans("a2a.decide")) == 3 and spans("a2a.wait"))

        await eventually(all_exported, within=15)
    finally:
        worker.stop()

    decided = {s["attributes"]["a2a.target"]: s["attributes"] for s in spans("a2a.decide")}
    assert {target: a["a2a.decided_by"] for target, a in decided.items()} == {
        "beta": "policy v1 by alice",
        "gamma": "policy v1 by alice",
        "echo": "policy v1 by alice",  # it held the message
    }
    assert decided["gamma"]["a2a.reason"] == "denied_by_matrix"
    [wait] = spans("a2a.wait")
    # The human let it through: theirs is the decision.
    assert (wait["attributes"]["a2a.decided_by"], wait["attributes"]["a2a.approver"]) == (
        "bob",
        "bob",
    )
