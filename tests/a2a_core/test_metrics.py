"""/metrics and the per-call log line, as an operator's Prometheus and log pipeline see them."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest
from a2a.client import A2AClientError
from a2a.types.a2a_pb2 import TaskState
from prometheus_client.parser import text_string_to_metric_families

from a2a_core.asyncdb import db
from a2a_core.logging import JsonFormatter
from a2a_core.services.policy import policy_publish
from tests.a2a_core.protocol.helpers import request as a2a_request
from tests.a2a_core.protocol.helpers import send, stored_task
from tests.agents import ScriptedAgent
from tests.servers import free_port

pytestmark = pytest.mark.live


async def scrape(url: str, **headers: str) -> tuple[int, dict[tuple[str, tuple[Any, ...]], float]]:
    """GET {url}/metrics -> (status, {(sample name, sorted labels): value})."""
    async with httpx.AsyncClient(base_url=url) as http:
        response = await http.get("/metrics", headers=headers)
    if response.status_code != 200:
        return response.status_code, {}
    assert response.headers["content-type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return 200, samples


def value(samples: dict[tuple[str, tuple[Any, ...]], float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def publish(document: dict[str, Any]) -> None:
    await db(policy_publish, document=document, reason="test", actor_label="test")


async def test_calls_decisions_and_durations_are_counted(hub, sdk):
    await publish({"matrix": [{"caller": "beta", "target": "echo", "action": "deny"}]})
    await hub.endpoint_agent("echo")
    _, alpha = await hub.caller("alpha")
    _, beta = await hub.caller("beta")
    _, before = await scrape(hub.url)

    first = await send(await sdk("echo", alpha), a2a_request("echo one"))
    await send(await sdk("echo", alpha), a2a_request("fail on purpose"))
    with pytest.raises(A2AClientError):
        await send(await sdk("echo", beta), a2a_request("echo refused"))
    skill = (await stored_task(first.id)).skill

    status, after = await scrape(hub.url)
    assert status == 200

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    who = {"caller": "alpha", "target": "echo", "skill": skill}
    assert delta("a2a_calls_total", **who, status="completed") == 1
    assert delta("a2a_calls_total", **who, status="failed") == 1
    assert (
        delta("a2a_calls_total", caller="beta", target="echo", skill="", status="policy_rejected")
        == 1
    )
    assert delta("a2a_call_duration_seconds_count", **who) == 2
    assert delta("a2a_call_duration_seconds_sum", **who) > 0
    assert delta("a2a_policy_decisions_total", decision="deliver", reason="ok") == 2
    assert delta("a2a_policy_decisions_total", decision="reject", reason="denied_by_matrix") == 1
    assert value(after, "a2a_circuit_breaker_state", target="echo") == 0
    assert value(after, "a2a_queue_size") == 0
    assert value(after, "a2a_escalations_pending") == 0


async def test_an_open_breaker_and_a_held_message_show_in_the_gauges(hub, sdk):
    await publish(
        {
            "breaker": {"failureThreshold": 1, "cooldownSeconds": 60},
            "redirects": [],
            "matrix": [{"caller": "alpha", "target": "echo", "action": "approve"}],
        }
    )
    down = ScriptedAgent("down", port=free_port())  # registered, never started
    await hub.register_card(down.card_json)
    await hub.endpoint_agent("echo")
    _, alpha = await hub.caller("alpha")

    with pytest.raises(A2AClientError):
        await send(await sdk("down", alpha), a2a_request("echo anyone?"))
    held = await send(await sdk("echo", alpha), a2a_request("echo please"))
    assert held.status.state == TaskState.TASK_STATE_AUTH_REQUIRED

    _, samples = await scrape(hub.url)
    assert value(samples, "a2a_circuit_breaker_state", target="down") == 2  # open
    assert value(samples, "a2a_circuit_breaker_state", target="echo") == 0
    assert value(samples, "a2a_escalations_pending") == 1


async def test_with_a_metrics_token_a_scrape_without_it_is_refused(hub, settings):
    settings.HUB_METRICS_TOKEN = "scrape-secret"
    assert (await scrape(hub.url))[0] == 401
    assert (await scrape(hub.url, Authorization="Bearer wrong"))[0] == 401
    status, samples = await scrape(hub.url, Authorization="Bearer scrape-secret")
    assert status == 200
    assert ("a2a_escalations_pending", ()) in samples


async def test_each_call_logs_one_json_line_with_its_trace_id(hub, sdk, caplog):
    caplog.set_level(logging.INFO, logger="a2a_hub.calls")
    await hub.endpoint_agent("echo")
    _, alpha = await hub.caller("alpha")
    task = await send(await sdk("echo", alpha), a2a_request("echo hello"))
    stored = await stored_task(task.id)

    [record] = [r for r in caplog.records if r.getMessage() == "A2A call completed"]
    line = json.loads(JsonFormatter().format(record))
    assert line["level"] == "info"
    assert line["call_id"] == task.id
    assert (line["caller_agent_id"], line["target_agent_id"]) == ("alpha", "echo")
    assert line["status"] == "completed"
    assert line["trace_id"] == stored.trace_id and len(stored.trace_id) == 32
    assert line["duration_ms"] > 0


async def test_several_workers_sharing_a_metrics_directory_report_their_sum(hub, tmp_path):
    from tests.conftest import Worker

    await hub.endpoint_agent("echo")
    _, alpha = await hub.caller("alpha")
    workers = [Worker(PROMETHEUS_MULTIPROC_DIR=str(tmp_path)).wait() for _ in range(2)]
    try:
        for worker, calls in zip(workers, (2, 3), strict=True):
            for i in range(calls):
                async with httpx.AsyncClient(base_url=worker.url) as http:
                    response = await http.post(
                        "/a2a/echo/",
                        json={
                            "jsonrpc": "2.0",
                            "id": i,
                            "method": "SendMessage",
                            "params": {
                                "message": {
                                    "messageId": f"{worker.port}-{i}",
                                    "role": "ROLE_USER",
                                    "parts": [{"text": "echo hi"}],
                                }
                            },
                        },
                        headers={"Authorization": f"Bearer {alpha}", "A2A-Version": "1.0"},
                    )
                assert "result" in response.json()
        _, samples = await scrape(workers[0].url)
    finally:
        for worker in workers:
            worker.stop()
    calls = sum(
        v
        for (name, labels), v in samples.items()
        if name == "a2a_calls_total" and dict(labels)["caller"] == "alpha"
    )
    assert calls == 5
