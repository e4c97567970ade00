"""The demo's agents that give the hub something to handle: a ledger that is sometimes too
slow (seed 004), a flaky agent that trips its breaker, and ping and pong, a loop the hub
stops.
"""

from __future__ import annotations

import asyncio
import random
import time

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from a2a_core.demo import cast
from a2a_core.demo.common import artifact_texts, describe, refusal, say, state_of
from a2a_core.demo.turn import Behaviour, Turn, pause
from a2a_core.schemas.envelopes import FAN_OUT_KINDS

# --- request / response, sometimes too slow (seed 004) ---------------------------------------


class Ledger:
    """Answers requests; now and then too slowly for the caller's deadline (never twice in a
    row, so its breaker is not what this shows)."""

    SLOW_SHARE = 0.35

    def __init__(self) -> None:
        self.was_slow = False

    async def __call__(self, turn: Turn) -> None:
        if turn.kind != "request":
            await turn.reply("noted")
            return
        slow = not self.was_slow and random.random() < self.SLOW_SHARE
        self.was_slow = slow
        await (pause(4.5, 6.0) if slow else pause(0.2, 0.9))
        asked = str(turn.payload.get("text") or turn.text)
        answer = dict(cast.CUSTOMERS).get(asked, "No account by that name.")
        correlation = turn.envelope.get("correlationId")
        if not correlation:
            await turn.reply(answer)
            return
        envelope = turn.hub.envelope("response", {"text": answer}, correlationId=correlation)
        await turn.reply(answer, envelope=envelope)


# --- the breaker: healthy, then failing for a while, then healthy again -----------------------


class Outage:
    """Flaky's health: after a few good calls its database pool runs dry and every call fails
    (an HTTP 503, or a hang) for 12-16 s — less than its breaker's cool-down, so the trial
    call that follows finds it healthy again."""

    def __init__(self) -> None:
        self.budget = random.randint(2, 4)
        self.until = 0.0

    def down(self) -> bool:
        if self.until and time.monotonic() >= self.until:
            self.until = 0.0
            self.budget = random.randint(3, 5)
            say("breaker", "flaky: its database is back; healthy again")
        return self.until > 0

    def served(self) -> None:
        self.budget -= 1
        if self.budget <= 0 and not self.until:
            seconds = random.uniform(12, 16)
            self.until = time.monotonic() + seconds
            say("breaker", f"flaky: its database pool is exhausted; failing for {seconds:.0f} s")


class OutageGate:
    """Flaky's server while it is down: 503 to every call, after a long pause now and then."""

    def __init__(self, app: ASGIApp, outage: Outage) -> None:
        self.app, self.outage = app, outage

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and self.outage.down():
            if random.random() < 0.25:
                await asyncio.sleep(6)  # longer than the caller waits: a timeout
            response = JSONResponse(
                {"error": "database connection pool exhausted"}, status_code=503
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


def flaky(outage: Outage) -> Behaviour:
    async def behave(turn: Turn) -> None:
        if turn.kind in FAN_OUT_KINDS:
            await turn.reply("noted")
            return
        await pause(0.1, 0.4)
        outage.served()
        await turn.reply(f"synced: {turn.text[:80]}")

    return behave


# --- ping and pong: a loop the hub stops --------------------------------------------------------


async def ping(turn: Turn) -> None:
    if turn.kind != "request":
        await turn.reply("noted")
        return
    if turn.text.startswith("Do you hold"):
        await turn.reply("yes: ping holds that slot")  # the end of the line, were it reached
        return
    week = turn.text.rsplit("week", 1)[-1].split()[0] if "week" in turn.text else "?"
    await turn.start(f"syncing the deploy calendar of week {week}")
    say("loop", f"ping -> pong: confirm the deploy slots of week {week}")
    try:
        result = await turn.hub.call(
            "pong", f"Confirm the deploy slots of week {week}", parent=turn.task_id
        )
        said = " / ".join(artifact_texts(result)) or state_of(result)
    except Exception as exc:
        said = describe(exc)
    await turn.artifact("calendar", text=f"week {week}: {said}")
    await turn.complete(f"week {week} synced as far as pong allowed")


async def pong(turn: Turn) -> None:
    if turn.kind != "request":
        await turn.reply("noted")
        return
    week = turn.text.rsplit("week", 1)[-1].split()[0] if "week" in turn.text else "?"
    await turn.start(f"checking the slots of week {week} against the rota")
    say("loop", f"pong -> ping: do you hold Tuesday 14:00 of week {week}?")
    try:
        result = await turn.hub.call(
            "ping", f"Do you hold Tuesday 14:00 of week {week}?", parent=turn.task_id
        )
        said = " / ".join(artifact_texts(result)) or state_of(result)
    except Exception as exc:
        if reason := refusal(exc):
            say("loop", f"the hub refuses pong -> ping: {reason}")
        said = describe(exc)
    await turn.artifact("slots", text=f"week {week}: {said}")
    await turn.complete(f"week {week}: {said}"[:200])
