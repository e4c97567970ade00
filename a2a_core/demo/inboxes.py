"""The demo's inbox agents and its director, in one process.

Inbox agents (reviewer, scribe, ops) have no server: each holds a websocket to the hub with
`HubClient.inbox()` (reconnecting when the hub restarts) and reports on its deliveries.
Monitor and the director mostly call, but hold their inboxes too (broadcasts reach them).
The director starts a scenario every 2-6 s: each kind once, in the first minute, then at
random, weighted towards the everyday ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

import websockets

from a2a_core.client.hub import RequestFailed
from a2a_core.client.inbox import Delivery, HubFrameError, InboxClosed
from a2a_core.demo import cast
from a2a_core.demo.common import (
    CastClient,
    describe,
    load_config,
    refusal,
    retry_after,
    run,
    say,
    state_of,
    status_text,
)
from a2a_core.schemas.envelopes import ENVELOPE_MEDIA_TYPE

Handler = Callable[[Delivery], Awaitable[None]]

# How long ops waits for an operator before it gives a question up (and withdraws it).
QUESTION_SECONDS = 600.0
# At most this many scenarios run at once; a tick finding them all busy starts none.
MAX_RUNNING = 6


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
            await _sleep(stop, 2.0)  # the hub is away (restarting?): try again


async def _sleep(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)


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
            await _sleep(stop, 30.0)
            now = time.monotonic()
            for task_id, (asked, delivery) in list(self.waiting.items()):
                if now - asked < QUESTION_SECONDS:
                    continue
                self.waiting.pop(task_id, None)
                with contextlib.suppress(HubFrameError, ConnectionError, TimeoutError):
                    await delivery.fail("no operator answered in 10 minutes; change postponed")
                    say("escalation", "ops gives a question up: nobody answered in 10 minutes")


# --- the director ------------------------------------------------------------------------------


class Director:
    """Starts the scenarios. Each runs in its own task and logs its steps; a failure is a line
    in the log, never the end of the demo."""

    def __init__(self, director: CastClient, monitor: CastClient, pace: float) -> None:
        self.hub, self.monitor, self.pace = director, monitor, pace
        self.scenes: dict[str, tuple[Callable[[], Awaitable[None]], float]] = {
            "chain": (self.chain, 3.0),
            "review": (self.review, 3.0),
            "request": (self.request, 3.0),
            "knowledge": (self.knowledge, 2.0),
            "loop": (self.loop, 1.0),
            "denied": (self.denied, 0.7),
            "escalation": (self.ask_human, 0.7),
            "sign-off": (self.sign_off, 0.7),
            "breaker": (self.breaker, 0.7),
            "burst": (self.burst, 0.5),
        }
        self.running: dict[str, int] = {}
        self.last_burst = -60.0
        self.tasks: set[asyncio.Task[None]] = set()

    # -- scheduling --

    def _ready(self, name: str) -> bool:
        if name == "breaker" and self.running.get(name):
            return False  # one outage at a time
        return not (name == "burst" and time.monotonic() - self.last_burst < 60)

    def _pick(self) -> str | None:
        names = [n for n in self.scenes if self._ready(n)]
        if not names:
            return None
        return random.choices(names, weights=[self.scenes[n][1] for n in names])[0]

    async def play(self, stop: asyncio.Event) -> None:
        # The first round plays every kind, the longest (an outage and its recovery) first.
        first = [n for n in self.scenes if n != "breaker"]
        random.shuffle(first)
        queue = ["breaker", *first]
        while not stop.is_set():
            await _sleep(stop, random.uniform(2.0, 6.0) * self.pace)
            if stop.is_set():
                break
            if len(self.tasks) >= MAX_RUNNING:
                continue  # the first round's next scene waits its turn
            name = queue.pop(0) if queue else self._pick()
            if name is not None:
                self._start(name)
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    def _start(self, name: str) -> None:
        scene = self.scenes[name][0]

        async def guarded() -> None:
            self.running[name] = self.running.get(name, 0) + 1
            try:
                await scene()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                say(name, describe(exc))
            finally:
                self.running[name] -= 1

        task = asyncio.get_running_loop().create_task(guarded(), name=f"scene-{name}")
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    # -- the scenarios --

    async def chain(self) -> None:
        """Seed 003 UC-7: pm -> architect -> tester, each a child of the task before."""
        feature = random.choice(cast.FEATURES)
        say("chain", f"director -> pm: spec {feature.title!r}")
        result = await self.hub.send_task_request(
            "pm",
            f"Spec: {feature.title}",
            f"Write the spec of {feature.title} for the {feature.area} area.",
            task_type="design",
            complexity="high",
            acceptance_criteria=feature.criteria,
            files=feature.files,
            wait=True,
        )
        say("chain", f"pm -> architect -> tester: spec of {feature.title!r} {state_of(result)}")

    async def review(self) -> None:
        """Seed 002: an implementation reviewed until approved."""
        feature = random.choice(cast.FEATURES)
        say("review", f"director -> implementer: implement {feature.title!r}")
        result = await self.hub.send_task_request(
            "implementer",
            f"Implement: {feature.title}",
            f"Implement {feature.title} as specified; get it reviewed.",
            complexity=random.choice(["medium", "high"]),
            acceptance_criteria=feature.criteria,
            files=feature.files,
            wait=True,
        )
        say("review", f"implementer: {feature.title!r} {state_of(result)}")

    async def request(self) -> None:
        """Seed 004: a request with a deadline; the ledger misses it now and then."""
        question, _ = random.choice(cast.CUSTOMERS)
        within = 3.0
        say("request", f"director -> ledger: {question} (answer within {within:.0f} s)")
        started = time.monotonic()
        try:
            answer = await self.hub.request("ledger", question, within=within)
        except RequestFailed:
            say("request", f"no answer from ledger within {within:.0f} s: the request timed out")
            return
        took = time.monotonic() - started
        say("request", f"ledger answered in {took:.1f} s: {answer.get('text')}")

    async def knowledge(self) -> None:
        """Seed 002: a write-up shared with the agents it concerns, and a broadcast."""
        topic, discovery, _ = random.choice(cast.DISCOVERIES)
        say("knowledge", f"director -> scribe: write up {topic!r}")
        await self.hub.send_task_request(
            "scribe",
            f"Write up: {topic}",
            discovery,
            task_type="research",
            complexity="low",
            wait=True,
        )

    async def loop(self) -> None:
        """Ping and pong call each other: the hub refuses pong -> ping on the same chain."""
        week = random.randint(1, 52)
        say("loop", f"director -> ping: sync the deploy calendar of week {week}")
        await self.hub.call("ping", f"Sync the deploy calendar of week {week} with pong")

    async def denied(self) -> None:
        """A pair the policy's matrix denies."""
        ask = random.choice(cast.DENIED_ASKS)
        say("denied", f"monitor -> ledger: {ask}")
        try:
            result = await self.monitor.call("ledger", ask)
        except Exception as exc:
            say("denied", f"monitor -> ledger {describe(exc)}")
            return
        say("denied", f"ledger answered monitor ({state_of(result)})")

    async def ask_human(self) -> None:
        """Ops asks a human before a production change: the task waits, input-required."""
        change, _ = random.choice(cast.PRODUCTION_CHANGES)
        say("escalation", f"director -> ops: {change}")
        result = await self.hub.send_task_request(
            "ops", change, f"{change}, today.", complexity="medium", wait=True
        )
        if state_of(result) != "input-required":
            say("escalation", f"ops: {change} {state_of(result)}")

    async def sign_off(self) -> None:
        """A migration goes to review; the reviewer escalates it, and a human must decide."""
        migration, why = random.choice(cast.MIGRATIONS)
        say("sign-off", f"director -> reviewer: review {migration}")
        area = migration.split("/", 1)[0]
        await self.hub.send_review_request(
            "reviewer",
            f"Migration: {why}",
            [migration, f"tests/{area}/test_migrations.py"],
            review_level="T1 (senior)",
            wait=True,
        )

    async def breaker(self) -> None:
        """Flaky falls over mid-sync: three failures open its breaker, the hub refuses calls
        until the cool-down ends, and the trial call after it finds flaky healthy again."""
        say("breaker", "director -> flaky: sync invoices, 10 batches")
        for batch in range(1, 11):
            await asyncio.sleep(random.uniform(0.6, 1.0))
            text = f"Sync invoices batch {batch} ({random.randint(40, 160)} invoices)"
            try:
                result = await self.hub.call("flaky", text, timeout_seconds=4)
            except Exception as exc:
                if refusal(exc) != "circuit_open":
                    say("breaker", f"flaky failed batch {batch}: {describe(exc)}")
                    continue
                await self._after_cool_down(exc, batch)
                return
            if state_of(result) == "failed":  # it did not answer in time
                say("breaker", f"flaky failed batch {batch}: {status_text(result)}")

    async def _after_cool_down(self, exc: BaseException, batch: int) -> None:
        wait = retry_after(exc, cast.BREAKER_COOLDOWN)
        say("breaker", f"flaky's breaker is open: the hub refuses calls for {wait:.0f} s")
        for _ in range(3):
            await asyncio.sleep(wait + 1)
            try:
                result = await self.hub.call(
                    "flaky", f"Sync invoices batch {batch} (retry)", timeout_seconds=4
                )
            except Exception as again:
                wait = retry_after(again, cast.BREAKER_COOLDOWN)
                say("breaker", f"flaky still failing: {describe(again)}")
                continue
            if state_of(result) == "failed":
                wait = cast.BREAKER_COOLDOWN
                say("breaker", f"flaky still failing: {status_text(result)}")
                continue
            say("breaker", f"flaky synced batch {batch}: its breaker is closed again")
            return

    async def burst(self) -> None:
        """Monitor pages ops with a burst of alerts: past its per-minute limit, the hub says no."""
        self.last_burst = time.monotonic()
        count = cast.BURST_LIMIT * 2 + 5
        say("burst", f"monitor -> ops: {count} alerts at once (its limit: {cast.BURST_LIMIT}/min)")
        delivered, wait = 0, 0.0
        refused: list[str] = []
        for i in range(count):
            envelope = self.monitor.envelope(
                "notification",
                {"text": f"alert: {cast.ALERTS[i % len(cast.ALERTS)]}"},
                priority="high",
            )
            try:
                await self.monitor.call("ops", envelope=envelope, wait=False)
                delivered += 1
            except Exception as exc:
                if (reason := refusal(exc)) is None:
                    raise
                refused.append(reason)
                wait = retry_after(exc, 60)
        why = f" ({', '.join(sorted(set(refused)))}, retry in {wait:.0f} s)" if refused else ""
        say("burst", f"{delivered} delivered, {len(refused)} refused by the hub{why}")


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
