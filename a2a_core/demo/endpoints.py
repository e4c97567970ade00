"""The demo's endpoint agents: each a real a2a-sdk server on its own loopback port, all in one
process and one event loop.

The hub forwards calls to them like to any agent with a server. They call each other back
through the hub with their own tokens, as children of the task they work on (the hub tells
them its id in `metadata.a2aHub.taskId`), which makes the delegation chains and the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import Iterator

import uvicorn
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import AgentCard, Task
from google.protobuf.json_format import ParseDict
from starlette.applications import Starlette
from starlette.types import ASGIApp

from a2a_core.demo import cast
from a2a_core.demo.common import CastClient, describe, load_config, run, say
from a2a_core.demo.team import architect, implementer, pm, tester
from a2a_core.demo.trouble import Ledger, Outage, OutageGate, flaky, ping, pong
from a2a_core.demo.turn import Behaviour, Turn
from a2a_core.schemas.envelopes import FAN_OUT_KINDS

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
