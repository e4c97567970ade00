"""The policy, end to end: real agents, the official SDK client, the hub in between."""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import timedelta
from typing import Any

import httpx
import pytest
from a2a.client import A2AClientError, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import GetTaskRequest, TaskState

from a2a_core.asyncdb import db
from a2a_core.errors import Conflict, ValidationFailed
from a2a_core.models import (
    Agent,
    AuditEvent,
    Escalation,
    Message,
    PolicyVersion,
    Task,
    TaskEvent,
)
from a2a_core.policy import clock
from a2a_core.selectors.policy_dry_run import policy_dry_run
from a2a_core.services.agents import agent_suspend
from a2a_core.services.escalation_expiry import escalations_expire
from a2a_core.services.escalations import (
    escalation_approve,
    escalation_redirect,
    escalation_reject,
)
from a2a_core.services.policy import policy_publish, policy_rollback
from tests.a2a_core.protocol.helpers import eventually, request, send
from tests.agents import ScriptedAgent
from tests.servers import free_port

pytestmark = pytest.mark.live


async def publish(document: dict[str, Any], reason: str = "test") -> PolicyVersion:
    return await db(policy_publish, document=document, reason=reason, actor_label="test")


async def stored(**filters: Any) -> list[Message]:
    return await db(lambda: list(Message.objects.filter(**filters).order_by("pk")))


async def completed(client: Any, task_id: str) -> Any:
    async def check() -> Any:
        task = await client.get_task(GetTaskRequest(id=task_id))
        return task if task.status.state == TaskState.TASK_STATE_COMPLETED else None

    return await eventually(check)


# --- loops, limits, breakers ----------------------------------------------------------------


async def test_a_b_a_loop_is_stopped_with_the_loop_reason(hub, sdk):
    await hub.endpoint_agent("alpha")
    await hub.endpoint_agent("beta")
    _, token = await hub.caller("orchestrator")

    await send(
        await sdk("alpha", token), request("delegate beta delegate alpha echo round and round")
    )

    refused = await stored(sender__slug="beta", target__slug="alpha")
    assert [(m.decision, m.decision_reason) for m in refused] == [("reject", "loop_detected")]
    assert "orchestrator -> alpha -> beta -> alpha" in refused[0].decision_detail
    assert refused[0].task_id is None  # no task was created for it
    assert await db(lambda: Task.objects.filter(target__slug="alpha").count()) == 1


async def test_burst_over_the_rate_limit_is_refused_with_retry_after_then_accepted_later(hub, sdk):
    await publish({"limits": {"perMinute": 3}})
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client = await sdk("echo", token)

    for i in range(3):
        assert (
            await send(client, request(f"echo {i}"))
        ).status.state == TaskState.TASK_STATE_COMPLETED
    with pytest.raises(A2AClientError, match="-32054"):
        await send(client, request("echo one too many"))

    async with httpx.AsyncClient(base_url=hub.url) as raw:
        response = await raw.post(
            "/a2a/echo/rest/message:send",
            json={
                "message": {
                    "messageId": "rest-burst",
                    "role": "ROLE_USER",
                    "parts": [{"text": "echo x"}],
                }
            },
            headers={"Authorization": f"Bearer {token}", "A2A-Version": "1.0"},
        )
    assert response.status_code == 429
    retry_after = int(response.headers["retry-after"])
    assert 1 <= retry_after <= 60
    info = next(d for d in response.json()["error"]["details"] if d["@type"].endswith("ErrorInfo"))
    assert info["reason"] == "RATE_LIMITED"
    assert info["metadata"]["reason"] == "rate_limit_minute"
    assert info["metadata"]["retryAfterSeconds"] == str(retry_after)

    refused = await stored(decision="reject")
    assert {m.decision_reason for m in refused} == {"rate_limit_minute"}
    assert len(refused) == 2

    with clock.shifted(61):  # the next minute
        again = await send(client, request("echo later"))
    assert again.status.state == TaskState.TASK_STATE_COMPLETED


async def test_a_caller_over_its_tasks_in_flight_is_refused_until_one_finishes(hub, sdk):
    await publish(
        {"limits": {"concurrent": 2}, "agentLimits": {"sloth": {"incomingConcurrent": 5}}}
    )
    sloth, _, _ = await hub.endpoint_agent("sloth")
    _, token = await hub.caller("alpha")
    client = await sdk("sloth", token)
    # Calls that finished before do not count, however many.
    for i in range(3):
        assert (await send(client, request(f"echo {i}"))).status.state == (
            TaskState.TASK_STATE_COMPLETED
        )

    slow = [asyncio.create_task(send(client, request("slow 1.5"))) for _ in range(2)]
    await eventually(lambda: asyncio.sleep(0, len(sloth.state.messages) == 5))
    with pytest.raises(A2AClientError, match="-32054"):
        await send(client, request("echo a third at once"))
    assert [m.decision_reason for m in await stored(decision="reject")] == ["rate_limit_concurrent"]

    await asyncio.gather(*slow)
    after = await send(client, request("echo once they finished"))
    assert after.status.state == TaskState.TASK_STATE_COMPLETED


async def test_a_refused_message_can_be_retried_with_the_same_message_id(hub, sdk):
    await publish({"limits": {"perMinute": 1}})
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client = await sdk("echo", token)
    await send(client, request("echo first"))
    with pytest.raises(A2AClientError, match="-32054"):
        await send(client, request("echo second", message_id="try-again"))
    with clock.shifted(61):
        retried = await send(client, request("echo second", message_id="try-again"))
    assert retried.status.state == TaskState.TASK_STATE_COMPLETED
    attempts = await stored(message_id="try-again")
    assert [m.decision for m in attempts] == ["reject", "deliver"]


async def test_a_failing_agent_trips_its_breaker_and_recovers_through_half_open(hub, sdk):
    await publish({"breaker": {"failureThreshold": 2, "cooldownSeconds": 5}, "redirects": []})
    flaky = ScriptedAgent("flaky", port=free_port())  # registered, not started: it is down
    await hub.register_card(flaky.card_json)
    _, token = await hub.caller("alpha")
    client = await sdk("flaky", token)

    for _ in range(2):
        with pytest.raises(A2AClientError, match="flaky unreachable"):
            await send(client, request("echo anyone?"))
    with pytest.raises(A2AClientError, match="-32055"):
        await send(client, request("echo now?"))
    assert [m.decision_reason for m in await stored(decision="reject")] == ["circuit_open"]
    assert flaky.state.messages == []

    flaky.start(hub_url=hub.url, token=token)
    hub.agents.append(flaky)
    with clock.shifted(6):  # past the cool-down: half-open, one trial call
        probe = await send(client, request("echo probe"))
        closed = await send(client, request("echo after"))
    assert probe.status.state == closed.status.state == TaskState.TASK_STATE_COMPLETED
    assert [m["parts"][0]["text"] for m in flaky.state.messages] == ["echo probe", "echo after"]


# --- redirects ---------------------------------------------------------------------------------


@pytest.fixture
async def reviewers(hub, sdk):
    """reviewer (suspended), reviewer-2 (its team's) and outsider (another team's): every
    scripted agent has the skill id `script`. Returns (alpha's client for reviewer, the
    scripted reviewer-2 and outsider)."""
    await hub.endpoint_agent("reviewer")
    second, _, _ = await hub.endpoint_agent("reviewer-2")
    outsider, _, _ = await hub.endpoint_agent("outsider")
    _, token = await hub.caller("alpha")
    reviewer = await db(lambda: Agent.objects.get(slug="reviewer"))
    await db(agent_suspend, agent=reviewer, reason="test", actor_label="test")
    return await sdk("reviewer", token), second, outsider


async def redirected_message() -> Message:
    [message] = await stored(target__slug="reviewer")
    return message


async def test_a_suspended_agents_work_goes_to_the_skill_sharer_the_matrix_lets_the_caller_reach(
    reviewers,
):
    client, second, outsider = reviewers
    await publish({"matrix": [{"caller": "alpha", "target": "reviewer-2", "action": "allow"}]})

    task = await send(client, request("echo please review"))

    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert [m["parts"][0]["text"] for m in second.state.messages] == ["echo please review"]
    assert outsider.state.messages == []
    message = await redirected_message()
    assert (message.decision, message.decision_reason) == ("redirect", "redirected")
    assert message.decision_detail == (
        "reviewer is suspended; redirected to reviewer-2 (shares skill 'script' and matrix "
        "rule alpha -> reviewer-2 lets alpha reach it)"
    )
    assert await db(lambda: Message.objects.get(pk=message.pk).redirected_to.slug) == "reviewer-2"


async def test_a_suspended_agents_work_goes_to_the_agent_its_redirect_rule_names(reviewers):
    client, second, outsider = reviewers
    await publish({"redirects": [{"targets": ["reviewer"], "to": ["reviewer-2"]}]})

    task = await send(client, request("echo please review"))

    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert len(second.state.messages) == 1 and outsider.state.messages == []
    assert (await redirected_message()).decision_detail == (
        "reviewer is suspended; redirected to reviewer-2 (named by the redirect rule for reviewer)"
    )


async def test_an_agent_that_only_shares_the_skill_id_gets_nothing(reviewers):
    client, second, outsider = reviewers  # the default policy: no rule names anyone

    with pytest.raises(A2AClientError, match="reviewer is suspended"):
        await send(client, request("echo please review"))

    assert second.state.messages == [] and outsider.state.messages == []
    assert (await redirected_message()).decision_reason == "target_suspended"


# --- held for a human -----------------------------------------------------------------------


@pytest.fixture
async def held(hub, sdk):
    """alpha -> echo needs approval; returns (client, the held task, its escalation)."""
    await publish({"matrix": [{"caller": "alpha", "target": "echo", "action": "approve"}]})
    scripted, _, _ = await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client = await sdk("echo", token)
    task = await send(client, request("echo please"))
    escalation = await db(lambda: Escalation.objects.get(task_id=task.id))
    return client, task, escalation, scripted


async def test_a_held_message_waits_auth_required_and_nothing_reaches_the_agent(held):
    _, task, escalation, scripted = held
    assert task.status.state == TaskState.TASK_STATE_AUTH_REQUIRED
    assert "held for approval" in task.status.message.parts[0].text
    assert (escalation.kind, escalation.status) == ("approval", "pending")
    assert escalation.reason == "matrix rule alpha -> echo needs approval"
    assert scripted.state.messages == []
    [message] = await stored(task_id=task.id)
    assert (message.decision, message.decision_reason, message.delivery_state) == (
        "hold",
        "approval_required",
        "held",
    )


async def test_approved_message_is_delivered_and_the_task_completes(held, caplog):
    client, task, escalation, _ = held
    caplog.set_level(logging.WARNING)
    await db(escalation_approve, escalation_id=escalation.pk, actor_label="operator")
    done = await completed(client, task.id)
    assert done.artifacts[0].parts[0].text == "echo: please"
    assert await db(lambda: AuditEvent.objects.filter(action="escalation.approve").exists())
    # The agent begins its task as submitted; the hub's is working already, and stays so.
    states = await db(
        lambda: list(
            TaskEvent.objects.filter(task_id=task.id)
            .exclude(state="")
            .order_by("seq")
            .values_list("state", flat=True)
        )
    )
    assert states == ["auth-required", "working", "completed"]
    assert "illegal transition" not in caplog.text


async def test_edited_then_approved_message_delivers_the_edited_text(held):
    client, task, escalation, _ = held
    await db(
        escalation_approve,
        escalation_id=escalation.pk,
        actor_label="operator",
        edited_text="echo edited",
    )
    done = await completed(client, task.id)
    assert done.artifacts[0].parts[0].text == "echo: edited"
    decided = await db(lambda: Escalation.objects.get(pk=escalation.pk))
    assert decided.answer_data == {
        "originalParts": [{"text": "echo please"}],
        "diff": [{"path": "parts[0].text", "before": "echo please", "after": "echo edited"}],
    }


async def test_redirected_message_is_delivered_to_the_other_agent(hub, held):
    client, task, escalation, scripted = held
    other, _, _ = await hub.endpoint_agent("other")
    await db(escalation_redirect, escalation_id=escalation.pk, to="other", actor_label="operator")
    await completed(client, task.id)
    assert [m["parts"][0]["text"] for m in other.state.messages] == ["echo please"]
    assert scripted.state.messages == []
    stored = await db(lambda: Task.objects.select_related("target", "addressed_to").get(pk=task.id))
    assert (stored.target.slug, stored.addressed_to.slug) == ("other", "echo")
    assert stored.path == ["alpha", "other"]


async def test_rejected_message_ends_the_task_rejected_with_the_reason(held):
    client, task, escalation, scripted = held
    with pytest.raises(Exception, match="a reason is required"):
        await db(
            escalation_reject, escalation_id=escalation.pk, reason="  ", actor_label="operator"
        )
    await db(
        escalation_reject,
        escalation_id=escalation.pk,
        reason="not during the freeze",
        actor_label="operator",
    )
    final = await client.get_task(GetTaskRequest(id=task.id))
    assert final.status.state == TaskState.TASK_STATE_REJECTED
    assert "not during the freeze" in final.status.message.parts[0].text
    assert scripted.state.messages == []


async def test_nobody_deciding_before_the_deadline_rejects_it(held):
    client, task, escalation, _ = held
    assert await db(escalations_expire, now=escalation.deadline) == 0  # not yet
    assert await db(escalations_expire, now=escalation.deadline + timedelta(seconds=1)) == 1
    final = await client.get_task(GetTaskRequest(id=task.id))
    assert final.status.state == TaskState.TASK_STATE_REJECTED
    assert "nobody decided before the deadline" in final.status.message.parts[0].text
    assert (await db(lambda: Escalation.objects.get(pk=escalation.pk))).status == "expired"


async def test_a_decision_cannot_be_made_twice(held):
    _, _, escalation, _ = held
    await db(escalation_reject, escalation_id=escalation.pk, reason="no", actor_label="first")
    with pytest.raises(Conflict, match="already rejected"):
        await db(escalation_approve, escalation_id=escalation.pk, actor_label="second")


# --- the policy as versioned data, across workers --------------------------------------------


async def _client_at(base: str, slug: str, token: str) -> tuple[Any, httpx.AsyncClient]:
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    client = await ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create_from_url(
        f"{base}/a2a/{slug}"
    )
    return client, http


async def test_a_policy_change_reaches_another_worker_within_a_second(hub, second_worker):
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client, http = await _client_at(second_worker.url, "echo", token)
    try:
        assert (
            await send(client, request("echo before"))
        ).status.state == TaskState.TASK_STATE_COMPLETED
        await publish(
            {"matrix": [{"caller": "alpha", "target": "echo", "action": "deny"}]}, "freeze alpha"
        )
        await asyncio.sleep(1.0)
        with pytest.raises(A2AClientError, match="-32053"):
            await send(client, request("echo after"))
    finally:
        await http.aclose()
    [refused] = await stored(decision="reject")
    assert refused.decision_reason == "denied_by_matrix"


async def test_rollback_restores_an_earlier_policy_as_a_new_version(hub, sdk):
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client = await sdk("echo", token)
    await publish({"defaultAction": "deny"}, "lock everything down")
    await publish({"defaultAction": "allow"}, "open again")
    assert (await send(client, request("echo open"))).status.state == TaskState.TASK_STATE_COMPLETED

    await db(policy_rollback, number=1, reason="the incident is back", actor_label="test")

    with pytest.raises(A2AClientError, match="-32053"):
        await send(client, request("echo closed"))
    history = await db(
        lambda: list(
            PolicyVersion.objects.order_by("number").values_list("number", "reason", "is_active")
        )
    )
    assert history == [
        (1, "lock everything down", False),
        (2, "open again", False),
        (3, "rollback to v1: the incident is back", True),
    ]
    v3 = await db(lambda: PolicyVersion.objects.get(number=3))
    assert v3.diff == [{"op": "changed", "path": "defaultAction", "old": "allow", "new": "deny"}]


async def _seconds_into_minute() -> float:
    return time.time() % 60


async def test_a_rate_limit_lets_exactly_n_through_across_two_workers(hub, sdk, second_worker):
    limit = 8
    await publish({"limits": {"perMinute": limit}})
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    here = await sdk("echo", token)
    there, http = await _client_at(second_worker.url, "echo", token)
    if await _seconds_into_minute() > 45:  # do not straddle two windows
        await asyncio.sleep(61 - await _seconds_into_minute())

    async def attempt(client: Any, i: int) -> bool:
        try:
            await send(client, request(f"echo {i}"))
        except A2AClientError as exc:
            assert "-32054" in str(exc)
            return False
        return True

    try:
        results = await asyncio.gather(*(attempt(here if i % 2 else there, i) for i in range(30)))
    finally:
        await http.aclose()
    assert sum(results) == limit
    assert len(await stored(decision="deliver")) == limit


# --- dry-run ----------------------------------------------------------------------------------


async def test_a_dry_run_reports_what_a_draft_would_have_decided_differently(hub, sdk):
    await hub.endpoint_agent("echo")
    _, alpha = await hub.caller("alpha")
    _, beta = await hub.caller("beta")
    for i in range(3):
        await send(await sdk("echo", alpha), request(f"echo from alpha {i}"))
    for i in range(4):
        await send(await sdk("echo", beta), request(f"echo from beta {i}"))

    draft = {
        "matrix": [{"caller": "alpha", "target": "echo", "action": "deny"}],
        "agentLimits": {"beta": {"perMinute": 2}},
    }
    report = (await db(policy_dry_run, document=draft, last=100)).as_dict()

    assert report["messages"] == 7
    assert report["changed"] == 5
    assert report["transitions"] == {"deliver -> reject": 5}
    assert report["reasons"] == {"denied_by_matrix": 3, "rate_limit_minute": 2}
    callers = [example["caller"] for example in report["examples"]]
    assert callers == ["alpha", "alpha", "alpha", "beta", "beta"]
    assert report["examples"][0]["after"].startswith("reject (denied_by_matrix)")
    # Nothing was published by a dry-run.
    assert await db(lambda: PolicyVersion.objects.count()) == 0


async def test_a_dry_run_of_the_current_policy_changes_nothing_even_after_refusals(hub, sdk):
    current = {"breaker": {"failureThreshold": 1, "cooldownSeconds": 60}, "redirects": []}
    await publish(current)
    await hub.endpoint_agent("alpha")
    await hub.endpoint_agent("beta")
    flaky = ScriptedAgent("flaky", port=free_port())  # registered, not started: it is down
    await hub.register_card(flaky.card_json)
    _, token = await hub.caller("orchestrator")
    await send(await sdk("alpha", token), request("delegate beta delegate alpha echo loop"))
    with pytest.raises(A2AClientError, match="flaky unreachable"):
        await send(await sdk("flaky", token), request("echo anyone?"))
    with pytest.raises(A2AClientError, match="-32055"):
        await send(await sdk("flaky", token), request("echo now?"))
    reasons = {m.decision_reason for m in await stored(decision="reject")}
    assert reasons == {"loop_detected", "circuit_open"}

    report = (await db(policy_dry_run, document=current, last=100)).as_dict()

    assert (report["messages"], report["changed"], report["examples"]) == (5, 0, [])


async def test_a_dry_run_denying_one_pair_reports_only_that_pairs_messages(hub, sdk):
    await hub.endpoint_agent("alpha")
    await hub.endpoint_agent("beta")
    _, token = await hub.caller("orchestrator")
    await send(await sdk("alpha", token), request("delegate beta echo one"))
    await send(await sdk("alpha", token), request("echo two"))
    await send(await sdk("beta", token), request("echo three"))

    report = await db(
        policy_dry_run,
        document={"matrix": [{"caller": "alpha", "target": "beta", "action": "deny"}]},
        last=100,
    )

    assert (report.messages, report.changed) == (4, 1)
    assert report.pairs == {"alpha → beta": 1}
    assert report.examples[0]["before"] == "deliver (ok)"
    assert report.examples[0]["after"] == "reject (denied_by_matrix)"


async def test_a_dry_run_of_the_last_n_only_replays_those(hub, sdk):
    await hub.endpoint_agent("echo")
    _, alpha = await hub.caller("alpha")
    for i in range(5):
        await send(await sdk("echo", alpha), request(f"echo {i}"))
    report = await db(policy_dry_run, document={"defaultAction": "deny"}, last=2)
    assert (report.messages, report.changed) == (2, 2)


@pytest.mark.django_db
def test_a_dry_run_of_an_invalid_draft_names_the_field():
    with pytest.raises(ValidationFailed) as caught:
        policy_dry_run(document={"limits": {"perMinute": -1}, "maxHops": "many"})
    assert {problem.field for problem in caught.value.problems} == {"limits.perMinute", "maxHops"}
