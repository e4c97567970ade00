"""Delegation within the initiator's scope, end to end: real a2a-sdk agents, the hub between
them, the chain carried as the hub carries it (the call made while working on a task is its
child: `metadata.a2aHub.parentTaskId`)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from a2a.client import A2AClientError
from a2a.types.a2a_pb2 import TaskState

from a2a_core.asyncdb import db
from a2a_core.models import AuditEvent, Message, PolicyVersion, Task
from a2a_core.selectors.policy_dry_run import policy_dry_run
from a2a_core.services.policy import policy_publish
from tests.a2a_core.protocol.helpers import request, send
from tests.dashboard.test_task_chain_live import logged_in

pytestmark = pytest.mark.live

# alpha may reach beta, beta may reach charlie, alpha may not reach charlie.
A_B_C = [
    {"caller": "alpha", "target": "beta", "action": "allow"},
    {"caller": "beta", "target": "charlie", "action": "allow"},
    {"caller": "alpha", "target": "charlie", "action": "deny"},
]
GRANT = {"caller": "alpha", "target": "charlie", "via": "beta", "action": "allow"}


async def publish(matrix: list[dict[str, Any]], reason: str = "test") -> PolicyVersion:
    return await db(policy_publish, document={"matrix": matrix}, reason=reason, actor_label="test")


async def from_beta_to_charlie() -> list[Message]:
    return await db(
        lambda: list(
            Message.objects.filter(sender__slug="beta", target__slug="charlie").order_by("pk")
        )
    )


@pytest.fixture
async def chain(hub, sdk):
    """alpha (a caller) -> beta -> charlie (real agents): alpha's client for beta, charlie, and
    the tokens of alpha and beta."""
    _, _, beta_token = await hub.endpoint_agent("beta")
    charlie, _, _ = await hub.endpoint_agent("charlie")
    _, token = await hub.caller("alpha")
    return await sdk("beta", token), charlie, (token, beta_token)


async def test_a_delegation_the_initiator_may_not_make_is_refused_until_a_rule_grants_it(
    hub, chain, sdk
):
    client, charlie, (token, beta_token) = chain
    await publish(A_B_C)

    answer = await send(client, request("delegate charlie echo the numbers"))

    # beta's call to charlie, made while working on alpha's task, was refused: beta saw the
    # hub's refusal and said so in its answer.
    assert answer.status.state == TaskState.TASK_STATE_COMPLETED
    said = answer.artifacts[0].parts[0].text
    assert said.startswith("charlie said: error:")
    assert "alpha -> charlie is denied by matrix rule alpha -> charlie" in said
    assert charlie.state.messages == []
    [refused] = await from_beta_to_charlie()
    assert (refused.decision, refused.decision_reason) == ("reject", "delegation_exceeds_initiator")
    assert "chain alpha -> beta -> charlie" in refused.decision_detail
    assert refused.task_id is None
    # What beta is told, asking itself (over REST) while working on alpha's task.
    async with httpx.AsyncClient(base_url=hub.url) as raw:
        response = await raw.post(
            "/a2a/charlie/rest/message:send",
            json={
                "message": {
                    "messageId": "beta-asks-charlie",
                    "role": "ROLE_USER",
                    "parts": [{"text": "echo for alpha"}],
                    "metadata": {"a2aHub": {"parentTaskId": answer.id}},
                }
            },
            headers={"Authorization": f"Bearer {beta_token}", "A2A-Version": "1.0"},
        )
    assert response.status_code == 403
    info = next(d for d in response.json()["error"]["details"] if d["@type"].endswith("ErrorInfo"))
    assert info["metadata"]["reason"] == "delegation_exceeds_initiator"

    await publish([*A_B_C, GRANT], "alpha may reach charlie through beta")
    granted = await send(client, request("delegate charlie echo the numbers again"))

    assert granted.artifacts[0].parts[0].text == "charlie said: echo: the numbers again"
    assert [m["parts"][0]["text"] for m in charlie.state.messages] == ["echo the numbers again"]
    delivered = (await from_beta_to_charlie())[-1]
    assert (delivered.decision, delivered.decision_reason) == ("deliver", "ok")
    path = await db(lambda: Task.objects.get(pk=delivered.task_id).path)
    assert path == ["alpha", "beta", "charlie"]

    # The grant is for the delegation only: alpha calling charlie itself stays denied.
    with pytest.raises(A2AClientError, match="-32053"):
        await send(await sdk("charlie", token), request("echo straight to charlie"))
    direct = await db(lambda: Message.objects.get(sender__slug="alpha", target__slug="charlie"))
    assert direct.decision_reason == "denied_by_matrix"
    assert len(charlie.state.messages) == 1


async def test_the_trace_and_the_audit_show_the_refused_delegation_its_chain_and_reason(hub, chain):
    client, _, _ = chain
    await publish(A_B_C)
    answer = await send(client, request("delegate charlie echo hi"))
    task = await db(lambda: Task.objects.get(pk=answer.id))

    async with logged_in(hub.url, "viewer") as http:
        page = (await http.get(f"/traces/{task.trace_id}/")).text
        panel = (await http.get(f"/traces/{task.trace_id}/spans/{task.pk}/")).text
        audit = (await http.get("/audit/?reason=delegation_exceeds_initiator")).text

    assert "refused: delegation_exceeds_initiator" in page
    assert "chain alpha -&gt; beta -&gt; charlie" in page
    assert "alpha → beta" in panel  # the span's chain: the task it refused a call from
    # The audit lists it under its reason (one message: beta -> charlie).
    assert audit.count("delegation_exceeds_initiator</span>") == 1
    assert 'href="/agents/charlie/"' in audit


async def test_a_dry_run_counts_the_delegations_a_draft_would_refuse(chain):
    client, _, _ = chain  # the default policy: everything allowed
    await send(client, request("delegate charlie echo one"))
    await send(client, request("delegate charlie echo two"))
    assert [m.decision for m in await from_beta_to_charlie()] == ["deliver", "deliver"]

    refused = (await db(policy_dry_run, document={"matrix": A_B_C}, last=100)).as_dict()
    granted = (await db(policy_dry_run, document={"matrix": [*A_B_C, GRANT]}, last=100)).as_dict()

    assert refused["reasons"] == {"delegation_exceeds_initiator": 2}
    assert refused["pairs"] == {"beta → charlie": 2}
    assert "a rule alpha -> charlie via beta would grant it" in refused["examples"][0]["detail"]
    assert (granted["changed"], granted["reasons"]) == (0, {})
    # The audit keeps the policy versions; a dry-run publishes none.
    assert not await db(lambda: AuditEvent.objects.filter(action="policy.publish").exists())
