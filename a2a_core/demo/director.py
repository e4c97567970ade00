"""The demo's director: starts a scenario every 2-6 s, each kind once in the first minute,
then at random, weighted towards the everyday ones."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable

from a2a_core.client.hub import RequestFailed
from a2a_core.demo import cast
from a2a_core.demo.common import (
    CastClient,
    describe,
    refusal,
    retry_after,
    say,
    sleep_unless_stopped,
    state_of,
    status_text,
)

# At most this many scenarios run at once; a tick finding them all busy starts none.
MAX_RUNNING = 6


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
            await sleep_unless_stopped(stop, random.uniform(2.0, 6.0) * self.pace)
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
