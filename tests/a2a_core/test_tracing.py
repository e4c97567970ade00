"""OpenTelemetry export: a hub process with OTEL_EXPORTER_OTLP_ENDPOINT set sends its spans
over OTLP/HTTP to a real receiver, one trace across the caller, the hub and the agents."""

from __future__ import annotations

import asyncio
import gzip
import itertools
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from a2a_core import events, runtime
from a2a_core.asyncdb import db
from a2a_core.models import Escalation
from a2a_core.schemas.envelopes import ENVELOPE_EXTENSION, ENVELOPE_MEDIA_TYPE
from a2a_core.services.escalations import escalation_approve
from a2a_core.services.policy import policy_publish
from tests.a2a_core.inbox.helpers import Inbox
from tests.a2a_core.protocol.helpers import eventually
from tests.agents import ScriptedAgent
from tests.conftest import Worker
from tests.servers import free_port

pytestmark = pytest.mark.live

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"


class Receiver:
    """An OTLP/HTTP trace receiver: keeps every span it is sent, decoded."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest.FromString(body)
                for resource in request.resource_spans:
                    for scope in resource.scope_spans:
                        receiver.spans.extend(_span(span) for span in scope.spans)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _span(span: Any) -> dict[str, Any]:
    return {
        "name": span.name,
        "trace": span.trace_id.hex(),
        "id": span.span_id.hex(),
        "parent": span.parent_span_id.hex(),
        "attributes": {a.key: a.value.string_value for a in span.attributes},
        "start": span.start_time_unix_nano,
        "end": span.end_time_unix_nano,
    }


@pytest.fixture
def receiver():
    found = Receiver()
    yield found
    found.stop()


@pytest.fixture
def idle_hub(hub):
    """The live hub with its in-thread background work (outbox, sweeper, bus) stopped: a
    message a human lets through is delivered by the worker process the test starts."""
    loop = events._loop
    assert loop is not None
    asyncio.run_coroutine_threadsafe(runtime.stop(), loop).result(10)
    try:
        yield hub
    finally:
        asyncio.run_coroutine_threadsafe(runtime.start(), loop).result(10)


def send_message(
    token: str, text: str, *, message_id: str, traced: bool = True, parent: str = ""
) -> dict[str, Any]:
    """httpx.post arguments of a SendMessage; `traced`: with the caller's traceparent;
    `parent`: a delegation from that hub task."""
    traceparent = {"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"} if traced else {}
    metadata = {"metadata": {"a2aHub": {"parentTaskId": parent}}} if parent else {}
    return {
        "json": {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {
                "message": {
                    "messageId": message_id,
                    "role": "ROLE_USER",
                    "parts": [{"text": text}],
                    **metadata,
                }
            },
        },
        "headers": {
            "Authorization": f"Bearer {token}",
            "A2A-Version": "1.0",
            **traceparent,
        },
    }


async def start_agent(hub, name: str, hub_url: str) -> ScriptedAgent:
    scripted = ScriptedAgent(name, port=free_port())
    _, token = await hub.register_card(scripted.card_json)
    scripted.start(hub_url=hub_url, token=token)
    hub.agents.append(scripted)
    return scripted


async def test_a_two_level_delegation_is_one_trace_whose_spans_follow_the_chain(hub, receiver):
    worker = Worker(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url, OTEL_BSP_SCHEDULE_DELAY="50").wait()
    try:
        await start_agent(hub, "alpha", worker.url)
        await start_agent(hub, "beta", worker.url)
        _, token = await hub.caller("director")
        async with httpx.AsyncClient(base_url=worker.url, timeout=30) as http:
            response = await http.post(
                "/a2a/alpha/",
                **send_message(token, "delegate beta echo deep", message_id="traced-1"),
            )
        assert response.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"

        async def all_exported() -> bool:
            return len(receiver.spans) >= 6

        await eventually(all_exported, within=15)
    finally:
        worker.stop()

    spans = receiver.spans
    assert {span["trace"] for span in spans} == {CALLER_TRACE}
    by_id = {span["id"]: span for span in spans}

    def named(name: str, caller: str) -> dict[str, Any]:
        [found] = [
            s for s in spans if s["name"] == name and s["attributes"]["a2a.caller"] == caller
        ]
        return found

    first, second = named("a2a.request", "director"), named("a2a.request", "alpha")
    # The caller's own span is the parent of the hub's request span.
    assert first["parent"] == CALLER_SPAN
    assert by_id[named("a2a.decide", "director")["parent"]] is first
    to_alpha = named("a2a.forward", "director")
    assert by_id[to_alpha["parent"]] is first
    # alpha's call to beta, made while the hub's forward to alpha was open, hangs under it.
    assert by_id[second["parent"]] is to_alpha
    assert by_id[named("a2a.forward", "alpha")["parent"]] is second
    assert second["attributes"]["a2a.target"] == "beta"
    assert (
        second["attributes"]["a2a.decision"],
        second["attributes"]["a2a.reason"],
    ) == ("deliver", "ok")
    assert first["attributes"]["a2a.task_id"] and first["attributes"]["a2a.context_id"]


async def test_a_forward_span_holds_the_hub_s_and_the_agent_s_stretches_one_after_another(
    hub, receiver
):
    worker = Worker(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url, OTEL_BSP_SCHEDULE_DELAY="50").wait()
    stretches = [
        "a2a.hub.accepted",
        "a2a.hub.judged",
        "a2a.hub.committed",
        "a2a.hub.delivered",
        "a2a.agent",
        "a2a.hub.recorded",
    ]
    try:
        await start_agent(hub, "alpha", worker.url)
        _, token = await hub.caller("director")
        async with httpx.AsyncClient(base_url=worker.url, timeout=30) as http:
            response = await http.post(
                "/a2a/alpha/", **send_message(token, "echo split", message_id="split-1")
            )
        assert response.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"

        async def all_exported() -> bool:
            return sum(span["name"] in stretches for span in receiver.spans) == len(stretches)

        await eventually(all_exported, within=15)
    finally:
        worker.stop()

    [forward] = [s for s in receiver.spans if s["name"] == "a2a.forward"]
    children = sorted(
        (s for s in receiver.spans if s["parent"] == forward["id"]), key=lambda s: s["start"]
    )
    assert [s["name"] for s in children] == stretches
    assert [s["attributes"]["a2a.share"] for s in children] == [
        "hub",
        "hub",
        "hub",
        "hub",
        "agent",
        "hub",
    ]
    # One after another, from the call's receipt to its answer's record: they add up.
    for before, after in itertools.pairwise(children):
        assert before["end"] == after["start"]
    # From the gate's receipt of the call (before its request span, which starts once the
    # caller is known) to the answer's record, before the call returns.
    [request] = [s for s in receiver.spans if s["name"] == "a2a.request"]
    assert children[0]["start"] < children[-1]["end"] <= request["end"]
    # The agent's stretch is the forward itself: the hub's sending and its answer.
    agent = children[4]
    assert forward["start"] <= agent["start"] and agent["end"] <= forward["end"] + 1_000_000


async def test_a_held_message_s_wait_for_a_human_is_a_span_between_its_hold_and_approval(
    idle_hub, receiver
):
    hub = idle_hub
    await db(
        policy_publish,
        document={"matrix": [{"caller": "director", "target": "alpha", "action": "approve"}]},
        reason="test",
        actor_label="test",
    )
    worker = Worker(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url, OTEL_BSP_SCHEDULE_DELAY="50").wait()
    try:
        alpha = await start_agent(hub, "alpha", worker.url)
        _, token = await hub.caller("director")
        async with httpx.AsyncClient(base_url=worker.url, timeout=30) as http:
            response = await http.post(
                "/a2a/alpha/", **send_message(token, "echo hold me", message_id="held-1")
            )
        task = response.json()["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"
        escalation = await db(Escalation.objects.get, task_id=task["id"])
        before_approval = time.time_ns()
        await db(escalation_approve, escalation_id=escalation.pk, actor_label="operator")
        after_approval = time.time_ns()

        def spans(name: str) -> list[dict[str, Any]]:
            return [s for s in receiver.spans if s["name"] == name]

        async def delivered() -> bool:
            return bool(alpha.state.messages and spans("a2a.forward") and spans("a2a.wait"))

        await eventually(delivered, within=15)
    finally:
        worker.stop()

    [request] = spans("a2a.request")
    [wait] = spans("a2a.wait")
    [forward] = spans("a2a.forward")
    assert {request["trace"], wait["trace"], forward["trace"]} == {CALLER_TRACE}
    # The wait hangs under the held request, and the forward the approval let go under it.
    assert request["parent"] == CALLER_SPAN
    assert wait["parent"] == request["id"]
    assert forward["parent"] == wait["id"]
    # It begins with the hold, during the held request, and ends with the human's approval.
    assert request["start"] <= wait["start"] <= min(request["end"], before_approval)
    assert before_approval <= wait["end"] <= after_approval
    assert wait["end"] <= forward["start"]
    assert request["attributes"]["a2a.decision"] == "hold"
    assert forward["attributes"]["a2a.caller"] == "director"
    assert {
        key: wait["attributes"][key]
        for key in (
            "a2a.caller",
            "a2a.target",
            "a2a.task_id",
            "a2a.decision",
            "a2a.reason",
            "a2a.approver",
        )
    } == {
        "a2a.caller": "director",
        "a2a.target": "alpha",
        "a2a.task_id": task["id"],
        "a2a.decision": "deliver",
        "a2a.reason": "approved_by_human",
        # Who let it through.
        "a2a.approver": "operator",
    }


async def test_the_forward_to_an_inbox_agent_lasts_until_its_report_ends_the_task(hub, receiver):
    worker = Worker(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url, OTEL_BSP_SCHEDULE_DELAY="50").wait()
    try:
        await start_agent(hub, "alpha", worker.url)
        _, duc_token = await hub.caller("duc", inbox=True)
        _, token = await hub.caller("director")
        inbox = await Inbox.open(worker.url, "duc", duc_token)
        async with httpx.AsyncClient(base_url=worker.url, timeout=30) as http:
            call = asyncio.create_task(
                http.post("/a2a/duc/", **send_message(token, "review it", message_id="inbox-1"))
            )
            delivery = await inbox.next_of("delivery")
            await inbox.send({"type": "ack", "deliveryId": delivery["deliveryId"]})
            # While it works on the task, duc asks alpha (without a traceparent of its own).
            asked = await http.post(
                "/a2a/alpha/",
                **send_message(
                    duc_token,
                    "echo half way",
                    message_id="duc-1",
                    traced=False,
                    parent=delivery["taskId"],
                ),
            )
            assert asked.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
            before_report = time.time_ns()
            await inbox.send({"type": "status", "taskId": delivery["taskId"], "state": "completed"})
            answered = (await call).json()["result"]["task"]
        assert answered["status"]["state"] == "TASK_STATE_COMPLETED"
        await inbox.close()

        def spans(name: str, caller: str) -> list[dict[str, Any]]:
            return [
                s
                for s in receiver.spans
                if s["name"] == name and s["attributes"]["a2a.caller"] == caller
            ]

        async def exported() -> bool:
            return bool(spans("a2a.forward", "director") and spans("a2a.forward", "duc"))

        await eventually(exported, within=15)
    finally:
        worker.stop()

    [request] = spans("a2a.request", "director")
    [to_duc] = spans("a2a.forward", "director")
    [duc_asks] = spans("a2a.request", "duc")
    assert {request["trace"], to_duc["trace"], duc_asks["trace"]} == {CALLER_TRACE}
    assert to_duc["parent"] == request["id"]
    # duc's call while it worked hangs under the hub's forward to duc, which lasts until
    # duc's report ends the task.
    assert duc_asks["parent"] == to_duc["id"]
    assert to_duc["start"] <= duc_asks["start"] <= duc_asks["end"] <= to_duc["end"]
    assert before_report <= to_duc["end"]
    assert {
        key: to_duc["attributes"][key]
        for key in ("a2a.target", "a2a.task_id", "a2a.context_id", "a2a.decision")
    } == {
        "a2a.target": "duc",
        "a2a.task_id": answered["id"],
        "a2a.context_id": answered["contextId"],
        "a2a.decision": "deliver",
    }


async def test_each_copy_of_a_broadcast_is_a_forward_under_its_request(idle_hub, receiver):
    hub = idle_hub
    worker = Worker(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url, OTEL_BSP_SCHEDULE_DELAY="50").wait()
    try:
        alpha = await start_agent(hub, "alpha", worker.url)
        _, duc_token = await hub.caller("duc", inbox=True)
        _, token = await hub.caller("director")
        inbox = await Inbox.open(worker.url, "duc", duc_token)
        envelope = {
            "kind": "broadcast",
            "payload": {"scope": "all", "topic": "freeze", "message": "code freeze at 5pm"},
        }
        arguments = send_message(token, "", message_id="broadcast-1")
        arguments["json"]["params"]["message"].update(
            parts=[{"data": envelope, "mediaType": ENVELOPE_MEDIA_TYPE}],
            extensions=[ENVELOPE_EXTENSION],
        )
        async with httpx.AsyncClient(base_url=worker.url, timeout=30) as http:
            answered = (await http.post("/a2a/", **arguments)).json()
        assert "sent to 2 of 2 agents" in answered["result"]["message"]["parts"][0]["text"]
        delivery = await inbox.next_of("delivery")
        await inbox.send({"type": "ack", "deliveryId": delivery["deliveryId"]})
        await inbox.close()

        def forwards() -> dict[str, dict[str, Any]]:
            return {
                s["attributes"]["a2a.target"]: s
                for s in receiver.spans
                if s["name"] == "a2a.forward"
            }

        async def exported() -> bool:
            return bool(alpha.state.messages) and set(forwards()) == {"alpha", "duc"}

        await eventually(exported, within=15)
    finally:
        worker.stop()

    [request] = [s for s in receiver.spans if s["name"] == "a2a.request"]
    assert request["parent"] == CALLER_SPAN
    assert (request["attributes"]["a2a.decision"], request["attributes"]["a2a.reason"]) == (
        "deliver",
        "fan_out",
    )
    for target, forward in forwards().items():
        assert (forward["trace"], forward["parent"]) == (CALLER_TRACE, request["id"]), target
        assert {
            key: forward["attributes"][key]
            for key in ("a2a.caller", "a2a.context_id", "a2a.decision")
        } == {
            "a2a.caller": "director",
            "a2a.context_id": delivery["contextId"],
            "a2a.decision": "deliver",
        }, target
        assert request["start"] <= forward["start"] <= forward["end"], target


def test_without_an_endpoint_tracing_is_off_and_loads_nothing():
    script = (
        "import sys, django; django.setup()\n"
        "from a2a_core import tracing\n"
        "with tracing.request(caller='a', target='b', headers={}):\n"
        "    assert tracing.now() == 0\n"
        "print(tracing.enabled(), any(m.startswith('opentelemetry.sdk') for m in sys.modules))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        SECRET_KEY="test-only-secret-key-not-for-production-0123456789abcdef",
    )
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["False", "False"]
