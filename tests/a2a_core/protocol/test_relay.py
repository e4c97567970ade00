"""SendMessage relayed as JSON (A2A-Version 1.0 on the JSON-RPC endpoint) and the same request
served by the a2a-sdk's dispatcher (A2A-Version 1.0.0, which the relay leaves to the SDK):
the caller gets the same answer, the agent the same request, and the same rows are stored."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.a2a_core.protocol.helpers import stored_messages, stored_task

pytestmark = pytest.mark.live

# The relay takes exactly "1.0"; "1.0.0" is A2A 1.0 too, served by the SDK's dispatcher.
RELAYED, SDK = "1.0", "1.0.0"
VOLATILE = {"id", "contextId", "taskId", "messageId", "artifactId", "timestamp", "referenceTaskIds"}


def stable(value: Any) -> Any:
    """`value` without what differs from call to call (ids, times, the hub's own fields)."""
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if k not in VOLATILE and k != "a2aHub"}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


def _row(row: Any) -> tuple[Any, ...]:
    return (
        row.role,
        row.direction,
        row.kind,
        row.summary,
        stable(row.parts),
        stable(row.metadata),
        stable(row.request_metadata),
        row.extensions,
    )


def send_body(text: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": "call-1",
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "parts": [
                    {"text": text},
                    {"data": {"n": 1, "nested": {"big": 2**40, "list": [1, "x", None]}}},
                ],
                "metadata": {"caller.note": {"tags": ["x", 1]}},
            },
            "configuration": {"acceptedOutputModes": ["text/plain"], "historyLength": 5},
            "metadata": {"caller.request": {"budget": 3}},
        },
    }


@pytest.mark.parametrize("text", ["echo relayed", "reply relayed", "meta"])
async def test_the_relay_answers_and_forwards_what_the_sdk_s_dispatcher_does(hub, text):
    agent, _, _ = await hub.endpoint_agent("meta")
    _, token = await hub.caller("alpha")
    answers = {}
    async with httpx.AsyncClient(base_url=hub.url, timeout=30) as http:
        for version in (RELAYED, SDK):
            response = await http.post(
                "/a2a/meta/",
                json=send_body(text),
                headers={"Authorization": f"Bearer {token}", "A2A-Version": version},
            )
            assert response.status_code == 200
            answers[version] = response.json()
    relayed, direct = answers[RELAYED], answers[SDK]
    assert relayed["id"] == direct["id"] == "call-1"
    assert stable(relayed) == stable(direct)
    assert list(relayed["result"]) == list(direct["result"])  # a task, or a message, both
    # The agent got the same message and request metadata both times.
    assert len(agent.state.messages) == 2
    assert stable(agent.state.messages[0]) == stable(agent.state.messages[1])
    assert agent.state.request_metadata[0] == agent.state.request_metadata[1]
    assert agent.state.messages[0]["metadata"]["caller.note"] == {"tags": ["x", 1.0]}
    # And the hub stored the same: the caller's message, the agent's answer.
    if "task" in relayed["result"]:
        rows = [
            await stored_messages(answer["result"]["task"]["id"]) for answer in (relayed, direct)
        ]
        assert [_row(r) for r in rows[0]] == [_row(r) for r in rows[1]]
        states = [
            (await stored_task(answer["result"]["task"]["id"])).state
            for answer in (relayed, direct)
        ]
        assert states[0] == states[1]


async def test_a_request_the_sdk_refuses_is_refused_in_the_sdk_s_words(hub):
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    body = send_body("echo hi")
    del body["params"]["message"]["messageId"]  # required by A2A: not plain, the SDK's
    async with httpx.AsyncClient(base_url=hub.url, timeout=30) as http:
        response = await http.post(
            "/a2a/echo/",
            json=body,
            headers={"Authorization": f"Bearer {token}", "A2A-Version": RELAYED},
        )
    error = response.json()["error"]
    assert error["code"] == -32602
    assert error["message"] == "Validation failed"
