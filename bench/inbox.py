"""Inbox delivery: how fast SendMessage calls reach inbox agents over their websockets.

    python bench/inbox.py [--seconds 8] [--concurrency 16] [--agents 50] [--drain 60]

One run: a fresh database (SQLite unless DATABASE_URL is set) with a caller and `--agents`
inbox agents, a policy whose limits are out of reach, and the hub (uvicorn, one worker) as a
separate process. Two scenarios follow: A with one inbox agent connected, B with all of them.
In each, closed-loop SendMessage calls (`returnImmediately`) go to the connected agents
round-robin after a one-second warmup; every agent acknowledges each delivery as it arrives.
A message's text carries its send time, so the agent measures call-to-receipt latency (same
machine, same clock) for the messages sent in the measured window.

Printed per scenario: calls/s the hub accepted, deliveries/s the agents received in the window,
p50/p99 of call-to-receipt and of the SendMessage call, errors; then, once every accepted
message has arrived (or `--drain` seconds passed), messages never received, deliveries the
database still holds unacknowledged (expect 0) and deliveries received twice. Last, B's
delivery rate over A's.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import websockets
from load import Result, free_port, send_message_body, serve_hub, stop, wait_for_port
from throughput import prepare_hub

POLICY = {
    "limits": {
        "perMinute": 10_000_000,
        "perHour": 100_000_000,
        "concurrent": 10_000_000,  # the agents never finish their tasks: all stay in flight
        "inboxQueue": 100_000,
    }
}
# An inbox agent's card has no supportedInterfaces: the hub is how it is reached.
INBOX_CARD = {
    "description": "Receives bench messages and acknowledges them.",
    "version": "1.0.0",
    "capabilities": {"streaming": False},
    "defaultInputModes": ["text/plain"],
    "defaultOutputModes": ["text/plain"],
    "skills": [{"id": "sink", "name": "Sink", "description": "acks", "tags": ["bench"]}],
}
WARMUP = 1.0


def register_inbox_agents(count: int) -> dict[str, str]:
    """Register `count` inbox agents and publish the policy; return slug -> token."""
    from django.db import connections

    from a2a_core.services.agents import agent_register
    from a2a_core.services.policy import policy_publish

    tokens = {}
    for i in range(count):
        card = {**INBOX_CARD, "name": f"inbox-{i:02d}"}
        registration = agent_register(card=card, delivery_mode="inbox")
        assert registration.token
        tokens[registration.agent.slug] = registration.token
    policy_publish(document=POLICY, reason="bench: limits out of reach, queue never full")
    connections.close_all()
    return tokens


def unacknowledged() -> int:
    from a2a_core.models import Delivery, DeliveryState

    waiting = [DeliveryState.PENDING, DeliveryState.QUEUED, DeliveryState.DELIVERED]
    return Delivery.objects.filter(state__in=waiting).count()


@dataclass
class Tally:
    """What one scenario saw. Messages are numbered; `sent` holds those the hub accepted."""

    measure_from: float
    stop_at: float
    sent: dict[int, float] = field(default_factory=dict)
    received: dict[int, float] = field(default_factory=dict)
    delivery_ids: set[int] = field(default_factory=set)
    twice: int = 0
    receipt_ms: list[float] = field(default_factory=list)
    acks: int = 0
    answers: int = 0
    frame_errors: list[dict[str, Any]] = field(default_factory=list)

    def in_window(self, moment: float) -> bool:
        return self.measure_from <= moment < self.stop_at


async def listen(ws: Any, tally: Tally) -> None:
    """Be an inbox agent: note each delivery's arrival and acknowledge it at once."""
    async for raw in ws:
        frame = json.loads(raw)
        if frame["type"] == "delivery":
            now = time.time()
            if frame["deliveryId"] in tally.delivery_ids:
                tally.twice += 1
            tally.delivery_ids.add(frame["deliveryId"])
            seq, sent = frame["message"]["parts"][0]["text"].split()
            tally.received.setdefault(int(seq), now)
            if tally.in_window(float(sent)):
                tally.receipt_ms.append((now - float(sent)) * 1000)
            await ws.send(json.dumps({"type": "ack", "deliveryId": frame["deliveryId"]}))
            tally.acks += 1
        elif frame["type"] in ("ok", "error"):
            tally.answers += 1
            if frame["type"] == "error":
                tally.frame_errors.append(frame)


async def scenario(
    hub: str, caller_token: str, agents: dict[str, str], args: argparse.Namespace
) -> tuple[Tally, Result, list[str], bool]:
    """Connect `agents`, load them, wait for the load to drain; return what was seen, the
    calls' result, the first few call errors, and whether everything drained in time."""
    sockets = await asyncio.gather(
        *(
            websockets.connect(
                f"ws://{hub}/ws/agents/{slug}/",
                additional_headers={"Authorization": f"Bearer {token}"},
            )
            for slug, token in agents.items()
        )
    )
    for ws in sockets:
        hello = json.loads(await ws.recv())
        assert hello["type"] == "hello", hello
    start = time.time()
    tally = Tally(measure_from=start + WARMUP, stop_at=start + WARMUP + args.seconds)
    listeners = [asyncio.create_task(listen(ws, tally)) for ws in sockets]
    urls = itertools.cycle([f"http://{hub}/a2a/{slug}/" for slug in agents])
    numbers = itertools.count()
    call_ms: list[float] = []
    calls = errors = 0
    problems: list[str] = []
    headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {caller_token}"}
    connector = aiohttp.TCPConnector(limit=args.concurrency)
    async with aiohttp.ClientSession(headers=headers, connector=connector) as session:

        async def worker() -> None:
            nonlocal calls, errors
            while (began := time.time()) < tally.stop_at:
                seq = next(numbers)
                body = send_message_body(f"{seq} {began:.6f}")
                params = body["params"]
                assert isinstance(params, dict)
                params["configuration"] = {"returnImmediately": True}
                try:
                    async with session.post(next(urls), json=body) as response:
                        answer = await response.json()
                        ok = response.status == 200 and "result" in answer
                except (aiohttp.ClientError, ValueError) as exc:
                    answer, ok = repr(exc), False
                if ok:
                    tally.sent[seq] = began
                elif len(problems) < 3:
                    problems.append(str(answer)[:300])
                if tally.in_window(began):
                    calls += 1
                    errors += not ok
                    call_ms.append((time.time() - began) * 1000)

        await asyncio.gather(*(worker() for _ in range(args.concurrency)))

    deadline = time.time() + args.drain
    drained = False
    while time.time() < deadline:
        if tally.sent.keys() <= tally.received.keys() and tally.answers >= tally.acks:
            drained = True
            break
        await asyncio.sleep(0.05)
    for ws in sockets:
        await ws.close()
    await asyncio.gather(*listeners, return_exceptions=True)
    return tally, Result(args.concurrency, calls, errors, args.seconds, call_ms), problems, drained


def report(label: str, tally: Tally, calls: Result, drained: bool, unacked: int) -> float:
    """Print one scenario's line; return its delivery rate."""
    receipts = Result(calls.concurrency, 0, 0, 1, tally.receipt_ms)
    delivered = sum(tally.in_window(t) for t in tally.received.values())
    rate = delivered / calls.seconds
    accepted = (calls.requests - calls.errors) / calls.seconds
    missing = len(tally.sent.keys() - tally.received.keys())
    print(
        f"{label:<11} accepted {accepted:7.1f} calls/s   delivered {rate:7.1f}/s   "
        f"receipt p50 {receipts.pct(50):7.1f} ms p99 {receipts.pct(99):7.1f} ms   "
        f"call p50 {calls.pct(50):6.1f} ms p99 {calls.pct(99):6.1f} ms   errors {calls.errors}   "
        f"never received {missing}{'' if drained else ' (drain timed out)'}   "
        f"unacked in db {unacked}   received twice {tally.twice}   ack errors {len(tally.frame_errors)}"
    )
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--drain", type=float, default=60.0, help="seconds to wait for the rest")
    args = parser.parse_args()

    data_dir = Path(tempfile.mkdtemp(prefix="hub-bench-inbox-"))
    # The endpoint agent prepare_hub registers besides the caller is never called here.
    env, caller_token = prepare_hub(data_dir, free_port())
    tokens = register_inbox_agents(args.agents)
    port = free_port()
    hub = serve_hub(port, env, "--ws", "websockets-sansio")
    try:
        wait_for_port(port, hub)
        database = "PostgreSQL" if "postgres" in env["DATABASE_URL"] else "SQLite"
        print(
            f"inbox delivery: SendMessage (returnImmediately), c={args.concurrency}, "
            f"{args.seconds:g} s after {WARMUP:g} s warmup, uvicorn x1 + {database}"
        )
        rates = []
        first = dict(itertools.islice(tokens.items(), 1))
        for label, agents in (("A 1 agent", first), (f"B {len(tokens)} agents", tokens)):
            tally, calls, problems, drained = asyncio.run(
                scenario(f"127.0.0.1:{port}", caller_token, agents, args)
            )
            rates.append(report(label, tally, calls, drained, unacknowledged()))
            for problem in problems:
                print(f"            failed call: {problem}")
            for frame in tally.frame_errors[:3]:
                print(f"            ack answered with: {frame}")
        ratio = f"{rates[1] / rates[0]:.2f}x" if rates[0] else "n/a (A delivered nothing)"
        print(f"ratio B/A delivery rate: {ratio}")
    except KeyboardInterrupt:
        print("interrupted")
    finally:
        stop(hub)


if __name__ == "__main__":
    main()
