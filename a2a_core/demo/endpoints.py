"""The demo's endpoint agents: each a real a2a-sdk server on its own loopback port, all in one
process and one event loop.

The hub forwards calls to them like to any agent with a server. They call each other back
through the hub with their own tokens, as children of the task they work on (the hub tells
them its id in `metadata.a2aHub.taskId`), which makes the delegation chains and the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import uvicorn
from a2a.helpers import (
    get_message_text,
    new_data_part,
    new_task_from_user_message,
    new_text_message,
    new_text_part,
)
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import AgentCard, Message, Part, Role, Task
from google.protobuf.json_format import MessageToDict, ParseDict
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from a2a_core.demo import cast
from a2a_core.demo.common import (
    CastClient,
    artifact_envelopes,
    artifact_texts,
    describe,
    hub_task_id,
    load_config,
    refusal,
    run,
    say,
    state_of,
)
from a2a_core.schemas.envelopes import ENVELOPE_EXTENSION, ENVELOPE_MEDIA_TYPE, FAN_OUT_KINDS

# Tasks each agent's own server remembers (the hub keeps them all; the agents need only the
# recent ones, for follow-up messages): the demo runs for hours.
TASKS_KEPT = 200


class RecentTaskStore(InMemoryTaskStore):
    """The SDK's in-memory task store, forgetting all but the `TASKS_KEPT` most recent tasks."""

    def __init__(self) -> None:
        super().__init__()
        self._recent: OrderedDict[str, ServerCallContext] = OrderedDict()

    async def save(self, task: Task, context: ServerCallContext) -> None:
        await super().save(task, context)
        self._recent[task.id] = context
        self._recent.move_to_end(task.id)
        while len(self._recent) > TASKS_KEPT:
            old, old_context = self._recent.popitem(last=False)
            await super().delete(old, old_context)


class Turn:
    """One message to an agent and what the agent does with it: start a task, add artifacts,
    complete it — or answer at once with a message."""

    def __init__(
        self, agent: str, context: RequestContext, queue: EventQueue, hub: CastClient
    ) -> None:
        assert context.message is not None
        self.agent, self.context, self.queue, self.hub = agent, context, queue, hub
        self.message: Message = context.message
        self.text = get_message_text(self.message)
        self.envelope: dict[str, Any] = next(
            (
                data
                for part in MessageToDict(self.message).get("parts") or []
                if isinstance(data := part.get("data"), dict) and "kind" in data
            ),
            {},
        )
        self.kind = str(self.envelope.get("kind") or "request")
        self.payload: dict[str, Any] = self.envelope.get("payload") or {}
        # The hub's id of this task: calls made for it carry it as their parent.
        self.task_id = hub_task_id(self.message)
        self.updater: TaskUpdater | None = None

    async def start(self, note: str) -> TaskUpdater:
        task = self.context.current_task
        if task is None:
            task = new_task_from_user_message(self.message)
            await self.queue.enqueue_event(task)
        self.updater = TaskUpdater(self.queue, task.id, task.context_id)
        await self.updater.start_work(self.updater.new_agent_message([new_text_part(note)]))
        return self.updater

    async def artifact(
        self, name: str, *, text: str | None = None, envelope: dict[str, Any] | None = None
    ) -> None:
        assert self.updater is not None
        parts: list[Part] = [new_text_part(text)] if text else []
        if envelope is not None:
            parts.append(new_data_part(envelope, media_type=ENVELOPE_MEDIA_TYPE))
        await self.updater.add_artifact(parts, name=name)

    async def complete(self, text: str) -> None:
        assert self.updater is not None
        await self.updater.complete(self.updater.new_agent_message([new_text_part(text)]))

    async def fail(self, text: str) -> None:
        assert self.updater is not None
        await self.updater.failed(self.updater.new_agent_message([new_text_part(text)]))

    async def reply(self, text: str, *, envelope: dict[str, Any] | None = None) -> None:
        """Answer with a message (no task)."""
        message = new_text_message(text, role=Role.ROLE_AGENT)
        if envelope is not None:
            message.parts.append(new_data_part(envelope, media_type=ENVELOPE_MEDIA_TYPE))
            message.extensions.append(ENVELOPE_EXTENSION)
        await self.queue.enqueue_event(message)


Behaviour = Callable[[Turn], Awaitable[None]]


async def pause(low: float, high: float) -> None:
    """An agent at work: a moment of thinking."""
    await asyncio.sleep(random.uniform(low, high))


def task_request(hub: CastClient, title: str, payload: dict[str, Any], **fields: Any) -> Any:
    return hub.envelope("task_request", {"title": title, **payload}, **fields)


# --- the chain: pm -> architect -> tester (seed 003 UC-7) ---------------------------------------


def _feature(turn: Turn, prefix: str) -> str:
    title = str(turn.payload.get("title") or turn.text or "the feature")
    return title.removeprefix(prefix).strip()


def _passed_on(turn: Turn) -> dict[str, Any]:
    """What a delegated task keeps of the task it came from: criteria and files."""
    payload: dict[str, Any] = {}
    if criteria := turn.payload.get("acceptanceCriteria"):
        payload["acceptanceCriteria"] = criteria
    if files := (turn.payload.get("context") or {}).get("files"):
        payload["context"] = {"files": files}
    return payload


async def pm(turn: Turn) -> None:
    if turn.kind != "task_request":
        await turn.reply("noted")
        return
    feature = _feature(turn, "Spec:")
    await turn.start(f"drafting the spec of {feature}")
    say("chain", f"pm -> architect: design review of {feature!r}")
    envelope = task_request(
        turn.hub,
        f"Design review: {feature}",
        {
            "description": f"Review the design of {feature} before the spec is final.",
            "taskType": "design",
            "complexity": "high",
            **_passed_on(turn),
        },
    )
    try:
        result = await turn.hub.call("architect", envelope=envelope, parent=turn.task_id)
        review = " / ".join(artifact_texts(result)) or f"the design review {state_of(result)}"
    except Exception as exc:
        review = f"no design review: {describe(exc)}"
    await pause(0.2, 0.6)
    criteria = turn.payload.get("acceptanceCriteria") or []
    spec = "\n".join(
        [
            f"# {feature}",
            "",
            "## Acceptance criteria",
            *(f"- {c}" for c in criteria),
            "",
            "## Design review",
            review,
        ]
    )
    await turn.artifact("spec", text=spec)
    await turn.complete(f"the spec of {feature} is ready")


async def architect(turn: Turn) -> None:
    if turn.kind == "escalation":
        await sign_off(turn)
        return
    if turn.kind != "task_request":
        await turn.reply("noted")
        return
    feature = _feature(turn, "Design review:")
    await turn.start(f"reviewing the design of {feature}")
    say("chain", f"architect -> tester: test strategy for {feature!r}")
    envelope = task_request(
        turn.hub,
        f"Test strategy: {feature}",
        {"taskType": "analysis", "complexity": "medium", **_passed_on(turn)},
    )
    try:
        result = await turn.hub.call("tester", envelope=envelope, parent=turn.task_id)
        plan = " / ".join(artifact_texts(result)) or f"the test strategy {state_of(result)}"
    except Exception as exc:
        plan = f"no test strategy: {describe(exc)}"
    await pause(0.2, 0.6)
    notes = random.choice(
        [
            "one new table, indexed on (account_id, created_at); no change to existing APIs",
            "a background job with retries; idempotent by request id",
            "read path cached for 60 s; invalidated on write",
        ]
    )
    await turn.artifact("design-review", text=f"{feature}: {notes}. Tests: {plan}")
    await turn.complete(f"design of {feature} approved with notes")


async def sign_off(turn: Turn) -> None:
    """An escalation a human let through: the architect signs the change off."""
    files = turn.payload.get("files") or []
    what = files[0] if files else str(turn.payload.get("summary") or "the change")
    await turn.start(f"reading {what}")
    await pause(0.5, 1.0)
    await turn.artifact("sign-off", text=f"signed off {what}: run it in the 03:00 window")
    await turn.complete(f"signed off {what}")
    say("sign-off", f"architect signs off {what} (a human approved the escalation)")


async def tester(turn: Turn) -> None:
    if turn.kind != "task_request":
        await turn.reply("noted")
        return
    feature = _feature(turn, "Test strategy:")
    await turn.start(f"listing the cases of {feature}")
    await pause(0.5, 1.2)
    criteria = turn.payload.get("acceptanceCriteria") or []
    cases = [f"{c} (integration)" for c in criteria] + [
        "permission denied for another account's data (unit)",
        "the happy path in the browser (end to end)",
    ]
    plan = f"{len(cases)} cases for {feature}: " + "; ".join(cases)
    await turn.artifact("test-plan", text=plan)
    await turn.complete(f"{len(cases)} test cases")


# --- the review cycle (seed 002) -------------------------------------------------------------


async def implementer(turn: Turn) -> None:
    if turn.kind != "task_request":
        await turn.reply("noted")
        return
    feature = _feature(turn, "Implement:")
    files = list((turn.payload.get("context") or {}).get("files") or [f"{feature.lower()}.py"])
    branch = "feat/" + "-".join(feature.lower().split())[:40]
    await turn.start(f"implementing {feature} on {branch}")
    await pause(0.6, 1.4)
    await turn.artifact("branch", text=f"{branch}: {len(files)} files changed")
    reviewer = await _find(turn.hub, "code-review", default="reviewer")
    notes: str | None = None
    fixed = 0
    verdict = "none"
    for round_ in range(1, 4):
        payload: dict[str, Any] = {
            "title": f"Review: {feature}",
            "files": files,
            "branch": branch,
            "authorAgent": "implementer",
            "reviewLevel": "T2+",
        }
        if notes:
            payload["priorReviewNotes"] = notes
        again = f" again ({fixed} concerns fixed)" if fixed else ""
        say("review", f"implementer -> {reviewer}: review {feature!r}{again}")
        envelope = turn.hub.envelope("review_request", payload)
        try:
            result = await turn.hub.call(reviewer, envelope=envelope, parent=turn.task_id)
        except Exception as exc:
            say("review", f"implementer: the review of {feature!r} failed: {describe(exc)}")
            break
        verdicts = _review_responses(result)
        if not verdicts:
            say("review", f"{reviewer} -> implementer: no verdict ({state_of(result)})")
            break
        verdict = str(verdicts[-1].get("verdict"))
        concerns = verdicts[-1].get("concerns") or []
        say("review", f"{reviewer} -> implementer: {verdict} ({len(concerns)} concerns)")
        if verdict != "changes_requested" or round_ == 3:
            break
        notes = "; ".join(str(c.get("description")) for c in concerns)[:300]
        fixed = len(concerns)
        await pause(0.8, 1.6)  # fixing
    done = verdict == "approved"
    response = turn.hub.envelope(
        "task_response",
        {
            "taskId": turn.task_id or branch,
            "action": "completed" if done else "blocked",
            **({} if done else {"reason": f"the review ended {verdict}"}),
            "result": {
                "summary": f"{feature} on {branch}, review {verdict}",
                "branch": branch,
                "filesChanged": files,
                "nextSteps": ["merge after CI"] if done else ["ask a senior reviewer"],
            },
        },
    )
    await turn.artifact("result", envelope=response)
    await turn.complete(f"{feature}: review {verdict}")


def _review_responses(result: Task | Message) -> list[dict[str, Any]]:
    return [dict(e.get("payload") or {}) for e in artifact_envelopes(result, "review_response")]


_found: dict[str, str] = {}


async def _find(hub: CastClient, skill: str, *, default: str) -> str:
    """A peer with `skill`, found once through the hub's discovery."""
    if skill not in _found:
        try:
            peers = await hub.discover(skill=skill)
            _found[skill] = str(peers[0]["slug"]) if peers else default
        except Exception:
            return default
    return _found[skill]


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


# --- the process -------------------------------------------------------------------------------


class CastExecutor(AgentExecutor):
    def __init__(self, agent: str, behaviour: Behaviour, hub: CastClient) -> None:
        self.agent, self.behaviour, self.hub = agent, behaviour, hub

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        turn = Turn(self.agent, context, event_queue, self.hub)
        if turn.kind in FAN_OUT_KINDS:
            await turn.reply("noted")  # a broadcast or knowledge share: read, nothing to do
            return
        try:
            await self.behaviour(turn)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            say(self.agent, f"{self.agent} failed: {describe(exc)}")
            if turn.updater is not None:
                await turn.fail(f"{self.agent} failed: {describe(exc)}")
            else:
                await turn.reply(f"{self.agent} could not do that: {describe(exc)}")

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id or "", context.context_id or "").cancel()


class AgentServer(uvicorn.Server):
    """A uvicorn server that leaves signals to the process (several share one loop)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def behaviours(outage: Outage) -> dict[str, Behaviour]:
    return {
        "pm": pm,
        "architect": architect,
        "tester": tester,
        "implementer": implementer,
        "ledger": Ledger(),
        "flaky": flaky(outage),
        "ping": ping,
        "pong": pong,
    }


def agent_app(slug: str, url: str, behaviour: Behaviour, hub: CastClient) -> Starlette:
    card = ParseDict(cast.card(cast.BY_SLUG[slug], url), AgentCard())
    handler = DefaultRequestHandler(
        agent_executor=CastExecutor(slug, behaviour, hub),
        task_store=RecentTaskStore(),
        agent_card=card,
    )
    return Starlette(
        routes=[
            *create_agent_card_routes(card),
            *create_jsonrpc_routes(handler, "/"),
            *create_rest_routes(handler, path_prefix="/rest"),
        ]
    )


async def serve(stop: asyncio.Event) -> None:
    config = load_config()
    hub_url = str(config["hubUrl"])
    outage = Outage()
    table = behaviours(outage)
    clients: list[CastClient] = []
    servers: list[AgentServer] = []
    for entry in config["agents"]:
        slug, port = str(entry["slug"]), int(entry["port"])
        hub = CastClient(hub_url, str(entry["token"]), agent=slug)
        clients.append(hub)
        app: ASGIApp = agent_app(slug, f"http://127.0.0.1:{port}", table[slug], hub)
        if slug == "flaky":
            app = OutageGate(app, outage)
        servers.append(
            AgentServer(
                uvicorn.Config(
                    app,
                    host="127.0.0.1",
                    port=port,
                    log_level="warning",
                    access_log=False,
                    lifespan="off",
                    timeout_graceful_shutdown=2,
                )
            )
        )
    running = [asyncio.create_task(server.serve()) for server in servers]
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait([*running, stopping], return_when=asyncio.FIRST_COMPLETED)
    for server in servers:
        server.should_exit = True
    await asyncio.wait(running, timeout=5)
    stopping.cancel()
    for hub in clients:
        await hub.close()


def main() -> None:
    run(serve)
