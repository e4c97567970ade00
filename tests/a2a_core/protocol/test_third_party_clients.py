"""Third-party A2A clients, used as their users use them, against a real a2a-sdk agent twice:
directly and through the hub. What each client shows its user is the same both ways, once the
ids the hub gives its tasks and contexts (and everything else fresh per call: message ids,
artifact ids, timestamps) are compared as placeholders.

The clients: Google ADK's `RemoteA2aAgent` run by an ADK `Runner`, Microsoft Agent Framework's
`A2AAgent`, and the `handler` CLI of `a2a-handler`, each in its own environment
(`tests/peers.py`), none of them calling a model.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.peers import PeerProcess, peer

pytestmark = pytest.mark.live

CARD = "/.well-known/agent-card.json"
SIDES = ("direct", "through")
# What the scripted agent (tests/agents.py) is asked, one conversation each: an artifact, an
# artifact in chunks, a question answered in a second message, a failure.
CONVERSATIONS = ["echo hi", "stream 3", "ask what colour?|blue", "fail it broke"]
# A uuid (with or without dashes), or the first 8 digits of one that a CLI shows alone.
FRESH_ID = re.compile(r"\b[0-9a-f]{8}(?:-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12})?\b")


def placeholders(value: Any) -> Any:
    """`value` with every fresh id replaced by a placeholder numbered by first appearance (the
    same id twice is the same placeholder), and timestamps left out.

    The hub also lists, in a task's history, the agent message its current status carries;
    the agent itself lists that message only once its status moves on. That message is left
    out of the history here, on both sides."""
    ids: dict[str, str] = {}

    def rename(match: re.Match[str]) -> str:
        return ids.setdefault(match.group(), f"<id{len(ids)}>")

    def walk(item: Any) -> Any:
        if isinstance(item, dict):
            status_message = (item.get("status") or {}).get("message")
            return {
                key: walk([m for m in value if m != status_message] if key == "history" else value)
                for key, value in item.items()
                if key != "timestamp"
            }
        if isinstance(item, list):
            return [walk(v) for v in item]
        if isinstance(item, str):
            return FRESH_ID.sub(rename, item)
        return item

    return walk(value)


def json_lines(out: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert lines and "error" not in lines[-1], out
    return lines


def by_conversation(lines: list[dict[str, Any]], count: int) -> list[Any]:
    """The lines of each of `count` conversations, with placeholders of its own."""
    return [
        placeholders([line for line in lines if line["conversation"] == number])
        for number in range(count)
    ]


async def side_by_side(
    hub: Any,
    peer_name: str,
    script: str,
    *args: str,
    version: str = "1.0",
    env: dict[str, str] | None = None,
) -> tuple[Any, Any]:
    """What `script` of the peer prints given the scripted agent's card URL and "-" (no token),
    and given the agent's card at the hub and a caller's hub token, `args` following (both run
    at once, against the same agent, with `env` added to their environment)."""
    agent, _, _ = await hub.endpoint_agent("scripted", version=version)
    _, token = await hub.caller("user")
    python = peer(peer_name)
    direct = PeerProcess(python, script, f"{agent.url}{CARD}", "-", *args, env=env)
    through = PeerProcess(python, script, f"{hub.url}/a2a/scripted{CARD}", token, *args, env=env)
    outputs = json_lines(direct.run()), json_lines(through.run())
    # Every call reached the agent in its own protocol version, from the client and the hub.
    calls = [r for r in agent.state.requests if "content-type" in r]
    assert {r["a2a-version"] for r in calls} == {version}
    return outputs


@pytest.mark.parametrize("version", ["1.0", "0.3"])
@pytest.mark.parametrize("mode", ["send", "stream"])
async def test_adk_remote_a2a_agent_shows_the_same_events_through_the_hub(hub, mode, version):
    direct, through = await side_by_side(
        hub, "adk", "adk_client.py", mode, *CONVERSATIONS, version=version
    )

    count = len(CONVERSATIONS)
    straight, relayed = by_conversation(direct, count), by_conversation(through, count)
    for text, one, other in zip(CONVERSATIONS, straight, relayed, strict=True):
        assert other == one, text
    # What ADK shows of each turn: the artifacts' text, the agent's question as a pending call.
    shown = [
        part for line in relayed[2] for part in line["event"].get("content", {}).get("parts", [])
    ]
    assert shown[0]["function_call"]["args"] == {"input_required": "what colour?"}
    assert shown[1:] == [{"text": "answer: blue"}]


@pytest.mark.parametrize("mode", ["send", "stream"])
async def test_adk_shows_the_same_events_through_the_hub_with_its_grpc_port_on(grpc_hub, mode):
    """With the hub's gRPC port on, the card of an agent that serves no gRPC itself lists no
    gRPC interface (HUB_CARD_GRPC=declared, the default): ADK, fetching the card by its URL,
    reads it and calls through the hub as it calls the agent."""
    direct, through = await side_by_side(grpc_hub, "adk", "adk_client.py", mode, *CONVERSATIONS)

    count = len(CONVERSATIONS)
    straight, relayed = by_conversation(direct, count), by_conversation(through, count)
    for text, one, other in zip(CONVERSATIONS, straight, relayed, strict=True):
        assert other == one, text
    shown = [p for line in relayed[0] for p in line["event"].get("content", {}).get("parts", [])]
    assert {"text": "echo: hi"} in shown


async def test_adk_refuses_a_card_listing_the_grpc_port_and_calls_through_given_the_card(
    grpc_hub, hub_grpc_port, settings
):
    """With HUB_CARD_GRPC=always every card lists the hub's gRPC interface, as A2A writes one,
    `host:port`, on a port of its own. ADK 2.13 refuses, by design, a card it fetched itself
    whose interfaces are not all at the card's own origin (scheme, host and port) — which a
    gRPC port of its own never is, in any form a gRPC client dials — the case it documents
    passing the card for; given the card, it calls through the hub and shows what it shows
    calling the agent directly."""
    settings.HUB_CARD_GRPC = "always"
    await grpc_hub.endpoint_agent("other")
    _, token = await grpc_hub.caller("someone")
    by_url = PeerProcess(
        peer("adk"), "adk_client.py", f"{grpc_hub.url}/a2a/other{CARD}", token, "send", "echo hi"
    )
    [refused] = [json.loads(line)["event"] for line in by_url.run().splitlines() if line[:1] == "{"]
    assert "Agent card RPC URL must" in refused["error_message"]
    assert refused["error_message"].endswith(f"127.0.0.1:{hub_grpc_port}")

    direct, through = await side_by_side(
        grpc_hub, "adk", "adk_client.py", "send", *CONVERSATIONS, env={"ADK_CARD": "object"}
    )

    count = len(CONVERSATIONS)
    straight, relayed = by_conversation(direct, count), by_conversation(through, count)
    for text, one, other in zip(CONVERSATIONS, straight, relayed, strict=True):
        assert other == one, text


@pytest.mark.parametrize("mode", ["send", "stream"])
async def test_agent_framework_a2a_agent_gives_the_same_responses_through_the_hub(hub, mode):
    # A blocking answer's failed task is the one thing left out: the framework shows its last
    # history message, and the hub's history of a failed task ends with the agent's reason
    # where the agent's own ends with the caller's message.
    conversations = CONVERSATIONS[:-1] if mode == "send" else CONVERSATIONS
    direct, through = await side_by_side(hub, "maf", "maf_client.py", mode, *conversations)

    count = len(conversations)
    straight, relayed = by_conversation(direct, count), by_conversation(through, count)
    for text, one, other in zip(conversations, straight, relayed, strict=True):
        assert other == one, text
    texts = [
        content.get("text")
        for line in relayed[2]
        for content in (
            line["response"].get("contents")
            or [c for m in line["response"].get("messages", []) for c in m["contents"]]
        )
    ]
    assert texts == ["what colour?", "answer: blue"]


async def test_a2a_handler_cli_prints_the_same_through_the_hub(hub, tmp_path):
    agent, _, _ = await hub.endpoint_agent("scripted")
    _, token = await hub.caller("user")
    at_hub = f"{hub.url}/a2a/scripted"
    python = peer("handler")

    def handler(side: str, *args: str, output: str = "text") -> PeerProcess:
        """`handler --output OUTPUT ARGS` for the agent ("direct") or for it at the hub
        ("through"), with a home of its own (where it keeps its sessions)."""
        url, auth = (agent.url, []) if side == "direct" else (at_hub, ["--bearer-env", "TOKEN"])
        return PeerProcess(
            python,
            "handler_cli.py",
            *("--output", output, *args, "--url", url, *auth),
            env={"HOME": str(tmp_path / side), "TOKEN": token},
        )

    def continuing(task: dict[str, Any]) -> list[str]:
        return ["--task-id", task["id"], "--context-id", task["contextId"]]

    def both(*args: str, output: str = "text") -> tuple[str, str]:
        direct, through = (handler(side, *args, output=output) for side in SIDES)
        return direct.run(), through.run()

    card, card_at_hub = (json.loads(out) for out in both("card", "get", output="json"))
    # The card as the agent registered it, its interfaces at the hub; the hub adds its own.
    rewritten = [
        {**interface, "url": interface["url"].replace(agent.url, at_hub)}
        for interface in card["supportedInterfaces"]
    ]
    assert card_at_hub["supportedInterfaces"][: len(rewritten)] == rewritten
    assert card["capabilities"].items() <= card_at_hub["capabilities"].items()
    mine = {k: v for k, v in card.items() if k not in ("supportedInterfaces", "capabilities")}
    assert {k: card_at_hub[k] for k in mine} == mine

    for args, shown in [
        (("--text", "echo hi"), "echo: hi"),
        (("--text", "stream 3", "--stream"), "chunk 0;chunk 1;chunk 2;"),
    ]:
        direct, through = both("message", "send", *args)
        assert placeholders(through) == placeholders(direct), args
        assert shown in through

    asked, asked_at_hub = (
        json.loads(out)
        for out in both("message", "send", "--text", "ask what colour?", output="json")
    )
    assert placeholders(asked_at_hub) == placeholders(asked)
    assert asked_at_hub["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    answering = [
        handler(side, "message", "send", "--text", "blue", *continuing(task))
        for side, task in zip(SIDES, [asked, asked_at_hub], strict=True)
    ]
    assert [run.run() for run in answering] == ["answer: blue\n"] * 2
    # The task as the agent has it now, and as the hub does.
    got, got_at_hub = (
        json.loads(handler(side, "task", "get", task["id"], output="json").run())
        for side, task in zip(SIDES, [asked, asked_at_hub], strict=True)
    )
    assert placeholders(got_at_hub) == placeholders(got)
    assert [m["parts"] for m in got_at_hub["history"]] == [
        [{"text": text}] for text in ["ask what colour?", "what colour?", "blue"]
    ]

    failed, failed_at_hub = (
        json.loads(out) for out in both("message", "send", "--text", "fail it broke", output="json")
    )
    assert placeholders(failed_at_hub) == placeholders(failed)
    assert failed_at_hub["status"]["message"]["parts"] == [{"text": "it broke"}]
