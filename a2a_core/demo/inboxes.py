"""The demo's inbox agents and its director (`a2a_core.demo.director`), in one process.

Inbox agents (reviewer, scribe, ops) have no server: each holds a websocket to the hub with
`HubClient.inbox()` (reconnecting when the hub restarts) and reports on its deliveries.
Monitor and the director mostly call, but hold their inboxes too (broadcasts reach them).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

import websockets

from a2a_core.client.inbox import Delivery, HubFrameError, InboxClosed
from a2a_core.demo import cast
from a2a_core.demo.common import (
    CastClient,
    describe,
    load_config,
    run,
    say,
    sleep_unless_stopped,
    state_of,
)
from a2a_core.demo.director import Director
from a2a_core.schemas.envelopes import ENVELOPE_MEDIA_TYPE

Handler = Callable[[Delivery], Awaitable[None]]

# How long ops waits for an operator before it gives a question up (and withdraws it).
QUESTION_SECONDS = 600.0


async def keep_inbox(hub: CastClient, handle: Handler, stop: asyncio.Event) -> None:
    """Take `hub`'s deliveries until `stop`, connecting again whenever the hub is away."""
    while not stop.is_set():
        try:
            async for delivery in hub.inbox():
                try:
                    await handle(delivery)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    say(hub.agent, f"{hub.agent}: {describe(exc)}")
                    if delivery.task_id:
                        with contextlib.suppress(Exception):
                            await delivery.fail(f"{hub.agent} could not do it: {describe(exc)}")
        except InboxClosed as exc:
            say(hub.agent, f"{hub.agent}: the hub closed its inbox ({exc.code}); it stops")
            return
        except (OSError, websockets.WebSocketException, TimeoutError, HubFrameError):
            await sleep_unless_stopped(stop, 2.0)  # the hub is away (restarting?): try again


async def just_ack(delivery: Delivery) -> None:
    """Broadcasts and anything else: acknowledged when the handler returns."""
    if delivery.task_id and delivery.kind not in ("broadcast", "knowledge_share"):
        await delivery.complete("noted")


# --- reviewer ----------------------------------------------------------------------------------


def reviewer(hub: CastClient) -> Handler:
    async def handle(delivery: Delivery) -> None:
        if delivery.kind != "review_request" or not delivery.task_id:
            await just_ack(delivery)
            return
        payload = (delivery.envelope or {}).get("payload") or {}
        files = [str(f) for f in payload.get("files") or []]
        title = str(payload.get("title") or "the change")
        await delivery.working(f"reviewing {len(files)} files")
        await asyncio.sleep(random.uniform(0.8, 1.6))
        migration = next((f for f in files if "/migrations/" in f), None)
        if migration is not None:
            verdict = await _escalate(hub, migration, title)
        elif payload.get("priorReviewNotes"):
            verdict = {"verdict": "approved", "summary": "all concerns addressed", "concerns": []}
        else:
            concerns = _concerns(files)
            verdict = {
                "verdict": "changes_requested",
                "summary": f"{len(concerns)} concerns in {len(files)} files",
                "concerns": concerns,
                "nextAction": "send_back_to_worker",
            }
        envelope = hub.envelope("review_response", verdict)
        await delivery.artifact(
            parts=[{"data": envelope, "mediaType": ENVELOPE_MEDIA_TYPE}], name="review"
        )
        await delivery.complete(f"{verdict['verdict']}: {verdict['summary']}")

    return handle


def _concerns(files: list[str]) -> list[dict[str, Any]]:
    code = [f for f in files if not f.startswith("tests/")] or files or ["app.py"]
    picked = random.sample(cast.CONCERNS, random.randint(1, 3))
    return [
        {
            "file": random.choice(code),
            "line": random.randint(12, 240),
            "severity": severity,
            "description": text,
        }
        for severity, text in picked
    ]


async def _escalate(hub: CastClient, migration: str, title: str) -> dict[str, Any]:
    """A migration is beyond a reviewer: escalate it to the architect. The policy holds every
    escalation for a human, so it waits in the hub's escalation inbox."""
    why = dict(cast.MIGRATIONS).get(migration, "changes the schema")
    envelope = hub.envelope(
        "escalation",
        {
            "reason": f"{migration} {why}; it needs a sign-off before it ships",
            "summary": title,
            "files": [migration],
        },
        priority="high",
    )
    try:
        result = await hub.call("architect", envelope=envelope, wait=False)
        say(
            "sign-off", f"reviewer -> architect: escalation {state_of(result)}, waiting for a human"
        )
    except Exception as exc:
        say("sign-off", f"reviewer -> architect: escalation {describe(exc)}")
    return {
        "verdict": "escalated",
        "summary": f"{migration} needs a senior's sign-off",
        "concerns": [
            {"file": migration, "severity": "must_fix", "description": f"{why}: needs a sign-off"}
        ],
        "nextAction": "escalate_to_senior",
    }


# --- scribe ------------------------------------------------------------------------------------


def scribe(hub: CastClient) -> Handler:
    async def handle(delivery: Delivery) -> None:
        if delivery.kind != "task_request" or not delivery.task_id:
            await just_ack(delivery)
            return
        payload = (delivery.envelope or {}).get("payload") or {}
        topic = str(payload.get("title") or "").removeprefix("Write up:").strip()
        found = next(
            (d for d in cast.DISCOVERIES if d[0] == topic), random.choice(cast.DISCOVERIES)
        )
        topic, discovery, relevant = found
        await delivery.working(f"writing up {topic}")
        await asyncio.sleep(random.uniform(0.4, 1.0))
        shared = await hub.share_knowledge(
            topic, relevant_to=list(relevant), discovery=discovery, priority="normal"
        )
        say(
            "knowledge",
            f"scribe shares {topic!r} with {', '.join(relevant)} "
            f"({len(shared.get('deliveries') or [])} deliveries)",
        )
        scope, headline, text, urgency = random.choice(cast.BROADCASTS)
        sent = await hub.broadcast(scope, headline, text, urgency=urgency)
        say(
            "knowledge",
            f"scribe broadcasts {headline!r} to {scope} "
            f"({len(sent.get('deliveries') or [])} recipients)",
        )
        await delivery.complete(f"shared {topic!r} and broadcast {headline!r}")

    return handle


# --- ops ---------------------------------------------------------------------------------------


class Ops:
    """Takes alerts and production changes; asks a human before each change, and gives a
    question up (withdrawing it) when nobody answers within QUESTION_SECONDS."""

    def __init__(self) -> None:
        self.waiting: dict[str, tuple[float, Delivery]] = {}

    async def __call__(self, delivery: Delivery) -> None:
        if not delivery.task_id:
            return  # a broadcast: acknowledged on return
        if delivery.kind == "response" or delivery.task_id in self.waiting:
            self.waiting.pop(delivery.task_id, None)
            await delivery.complete(f"done, as the operator said: {delivery.text}"[:500])
            say("escalation", f"a human answered ops: {delivery.text[:70]}")
            return
        if delivery.kind != "task_request":
            await delivery.complete("acknowledged")  # monitor's alerts
            return
        payload = (delivery.envelope or {}).get("payload") or {}
        change = str(payload.get("title") or delivery.text)
        question = dict(cast.PRODUCTION_CHANGES).get(change, f"{change}: go ahead?")
        await delivery.working(f"preparing: {change}")
        await delivery.ask_human(question, priority="high")
        self.waiting[delivery.task_id] = (time.monotonic(), delivery)
        say("escalation", f"ops asks a human: {question[:80]}")

    async def give_up_unanswered(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await sleep_unless_stopped(stop, 30.0)
            now = time.monotonic()
            for task_id, (asked, delivery) in list(self.waiting.items()):
                if now - asked < QUESTION_SECONDS:
                    continue
                self.waiting.pop(task_id, None)
                with contextlib.suppress(HubFrameError, ConnectionError, TimeoutError):
                    await delivery.fail("no operator answered in 10 minutes; change postponed")
                    say("escalation", "ops gives a question up: nobody answered in 10 minutes")


# --- the process -------------------------------------------------------------------------------


async def serve(stop: asyncio.Event) -> None:
    config = load_config()
    hub_url = str(config["hubUrl"])
    clients = {
        str(entry["slug"]): CastClient(hub_url, str(entry["token"]), agent=str(entry["slug"]))
        for entry in config["agents"]
    }
    ops = Ops()
    handlers: dict[str, Handler] = {
        "reviewer": reviewer(clients["reviewer"]),
        "scribe": scribe(clients["scribe"]),
        "ops": ops,
    }
    director = Director(clients["director"], clients["monitor"], float(config.get("pace", 1.0)))
    jobs = [
        asyncio.create_task(keep_inbox(hub, handlers.get(slug, just_ack), stop))
        for slug, hub in clients.items()
    ]
    jobs.append(asyncio.create_task(ops.give_up_unanswered(stop)))
    jobs.append(asyncio.create_task(director.play(stop)))
    await stop.wait()
    for job in jobs:
        job.cancel()
    await asyncio.gather(*jobs, return_exceptions=True)
    for hub in clients.values():
        with contextlib.suppress(Exception):
            await hub.close()


def main() -> None:
    run(serve)
