"""A scriptable a2a-sdk agent server for tests: the first word of a message says what to do.

echo TEXT            artifact "echo: TEXT" (the agent's `voice` instead of "echo"), completed
ask QUESTION         input-required asking QUESTION; the next message completes the task
slow SECONDS         waits, then completes
later SECONDS        answers with the task working, completes SECONDS later (with an agent
                     that ignores `blocking`, like several frameworks do, the caller gets
                     the working task)
stream N [PAUSE]     waits PAUSE seconds (default 0), then N artifact chunks (append,
                     lastChunk on the last), then completed
fail REASON          failed with REASON
reply TEXT           answers with a Message (no task)
slowreply SECONDS    waits, then answers with a Message (no task)
delegate AGENT TEXT  calls AGENT through the hub as a child of this task, then completes
                     with its answer
hang                 never answers
meta [gate|hub]      a task, status updates, a message and an artifact update, each with
                     metadata of its own (META); with `gate`, waits for `state.gate` after
                     the first update; with `hub`, each also claims the hub's key (`a2aHub`)
metareply TEXT       answers with a Message with metadata (META["message"])
rot13 TEXT           artifact with TEXT rot13-decoded, completed (an answer carrying what
                     the caller did not send in clear)
rot13reply TEXT      answers with a Message of TEXT rot13-decoded (no task)
metachunks           an artifact in two chunks, each with artifact metadata of its own
                     (META["chunks"]), then completed
"""

from __future__ import annotations

import asyncio
import codecs
import threading
from dataclasses import dataclass, field
from typing import Any

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.helpers import (
    get_message_text,
    new_task_from_user_message,
    new_text_message,
    new_text_part,
)
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.grpc_handler import GrpcHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Message,
    Part,
    Role,
    SendMessageRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
)
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette
from starlette.types import Receive, Scope, Send

from tests.servers import GrpcServerThread, ServerThread, free_port

# What the `meta` and `metareply` scripts put on what they send.
META: dict[str, dict[str, Any]] = {
    "task": {"agent.task": {"nested": [1, "two"]}},
    "working": {"agent.status": "working", "agent.step": 1},
    "said": {"agent.status": "said", "agent.step": 2},
    "message": {"agent.message": {"tokens": 7}},
    "artifact": {"agent.artifact": "kept"},
    "artifact_event": {"agent.artifactEvent": True},
    "done": {"agent.status": "done", "agent.step": 3},
    "chunks": {"chunk.first": {"at": 0}, "chunk.second": "then"},
}
# What `meta hub` adds to each: fields under the hub's own key.
FORGED = {"a2aHub": {"parentTaskId": "not-the-agent-s-to-say"}}


@dataclass
class AgentState:
    """What the agent saw, for tests to assert on."""

    requests: list[dict[str, str]] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    # The SendMessageRequest.metadata of each message, in the same order.
    request_metadata: list[dict[str, Any]] = field(default_factory=list)
    # What a `meta gate` script waits for.
    gate: threading.Event = field(default_factory=threading.Event)
    # Messages being worked on at once: now, and the most so far.
    at_once: int = 0
    most_at_once: int = 0
    hub_url: str = ""
    token: str = ""
    # What its echo says first: two agents with other voices answer the same input apart.
    voice: str = "echo"


class ScriptedExecutor(AgentExecutor):
    def __init__(self, state: AgentState) -> None:
        self.state = state

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.state.at_once += 1
        self.state.most_at_once = max(self.state.most_at_once, self.state.at_once)
        try:
            await self._execute(context, event_queue)
        finally:
            self.state.at_once -= 1

    async def _execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None
        self.state.messages.append(MessageToDict(message))
        self.state.request_metadata.append(context.metadata)
        text = get_message_text(message)
        command, _, rest = text.partition(" ")
        if command == "slowreply":
            await asyncio.sleep(float(rest or 1))
            await event_queue.enqueue_event(new_text_message("done", role=Role.ROLE_AGENT))
            return
        if command == "rot13reply":
            decoded = codecs.decode(rest, "rot13")
            await event_queue.enqueue_event(new_text_message(decoded, role=Role.ROLE_AGENT))
            return
        if command in ("reply", "metareply"):
            answer = new_text_message(f"reply: {rest}", role=Role.ROLE_AGENT)
            if command == "metareply":
                answer.metadata.update(META["message"])
            await event_queue.enqueue_event(answer)
            return
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(message)
            if command == "meta":
                task.metadata.update(META["task"])
                if rest == "hub":
                    task.metadata.update(FORGED)
            elif command == "later":  # its first answer says working
                task.status.state = TaskState.TASK_STATE_WORKING
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        if (
            context.current_task is not None
            and context.current_task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        ):
            await updater.start_work()
            await updater.add_artifact([new_text_part(f"answer: {text}")], name="answer")
            await updater.complete()
            return
        if command == "resubmit":  # says submitted again before it starts, as some agents do
            await updater.submit()
        await updater.start_work()
        if command == "ask":
            await updater.requires_input(
                updater.new_agent_message([new_text_part(rest or "what now?")])
            )
        elif command == "slow":
            await asyncio.sleep(float(rest or 1))
            await updater.add_artifact([new_text_part("done slowly")], name="result")
            await updater.complete()
        elif command == "later":
            await asyncio.sleep(float(rest or 1))
            await updater.add_artifact([new_text_part("done later")], name="result")
            await updater.complete()
        elif command == "stream":
            count_text, _, pause = rest.partition(" ")
            count = int(count_text or 3)
            await asyncio.sleep(float(pause or 0))
            artifact_id = "stream-1"
            for i in range(count):
                await asyncio.sleep(0.02)
                await updater.add_artifact(
                    [new_text_part(f"chunk {i};")],
                    artifact_id=artifact_id,
                    name="chunks",
                    append=i > 0,
                    last_chunk=i == count - 1,
                )
            await updater.complete()
        elif command == "rot13":
            await updater.add_artifact(
                [new_text_part(codecs.decode(rest, "rot13"))], name="decoded"
            )
            await updater.complete()
        elif command == "fail":
            await updater.failed(updater.new_agent_message([new_text_part(rest or "it broke")]))
        elif command == "delegate":
            target, _, subtext = rest.partition(" ")
            answer = await self._delegate(message, target, subtext)
            await updater.add_artifact(
                [new_text_part(f"{target} said: {answer}")], name="delegated"
            )
            await updater.complete()
        elif command == "hang":
            await asyncio.sleep(3600)
        elif command == "meta":
            await self._meta(updater, gate=rest == "gate", forge=rest == "hub")
        elif command == "metachunks":
            for i, (key, value) in enumerate(META["chunks"].items()):
                await updater.add_artifact(
                    [new_text_part(f"chunk {i};")],
                    artifact_id="chunks-1",
                    metadata={key: value},
                    append=i > 0,
                    last_chunk=i == 1,
                )
            await updater.complete()
        else:
            await updater.add_artifact(
                [new_text_part(f"{self.state.voice}: {rest if command == 'echo' else text}")],
                name="echo",
            )
            await updater.complete()

    async def _meta(self, updater: TaskUpdater, *, gate: bool, forge: bool) -> None:
        def meta(name: str) -> dict[str, Any]:
            return {**META[name], **FORGED} if forge else META[name]

        await updater.update_status(TaskState.TASK_STATE_WORKING, metadata=meta("working"))
        if gate:
            await asyncio.to_thread(self.state.gate.wait, 30)
        said = updater.new_agent_message([new_text_part("said")], metadata=meta("message"))
        await updater.update_status(TaskState.TASK_STATE_WORKING, said, metadata=meta("said"))
        event = TaskArtifactUpdateEvent(
            task_id=updater.task_id, context_id=updater.context_id, last_chunk=True
        )
        event.artifact.artifact_id = "meta-1"
        event.artifact.parts.append(new_text_part("with metadata"))
        event.artifact.metadata.update(META["artifact"])
        event.metadata.update(meta("artifact_event"))
        await updater.event_queue.enqueue_event(event)
        await updater.update_status(TaskState.TASK_STATE_COMPLETED, metadata=meta("done"))

    async def _delegate(self, incoming: Message, target: str, text: str) -> str:
        try:
            return await self._call(incoming, target, text)
        except Exception as exc:  # report it as the answer, as an agent would
            return f"error: {exc}"

    async def _call(self, incoming: Message, target: str, text: str) -> str:
        hub_task = MessageToDict(incoming.metadata).get("a2aHub", {}).get("taskId", "")
        async with httpx.AsyncClient(
            headers={"Authorization": f"Bearer {self.state.token}"}, timeout=30
        ) as http:
            factory = ClientFactory(ClientConfig(streaming=False, httpx_client=http))
            client = await factory.create_from_url(f"{self.state.hub_url}/a2a/{target}")
            request = SendMessageRequest(
                message=Message(
                    message_id=f"delegate-{hub_task}", role=Role.ROLE_USER, parts=[Part(text=text)]
                )
            )
            request.message.metadata.update({"a2aHub": {"parentTaskId": hub_task}})
            async for event in client.send_message(request):
                return " | ".join(p.text for a in event.task.artifacts for p in a.parts if p.text)
        return ""

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.cancel()


def agent_card(
    name: str, url: str, *, streaming: bool = True, binding: str = "JSONRPC", version: str = "1.0"
) -> AgentCard:
    interfaces = [
        AgentInterface(url=f"{url}/", protocol_binding="JSONRPC", protocol_version=version),
        AgentInterface(url=f"{url}/rest", protocol_binding="HTTP+JSON", protocol_version="1.0"),
    ]
    if binding == "GRPC":  # `url` is the gRPC address; the agent speaks nothing else
        interfaces = [AgentInterface(url=url, protocol_binding="GRPC", protocol_version="1.0")]
    if binding == "HTTP+JSON":
        interfaces.reverse()
    return AgentCard(
        name=name,
        description=f"{name}: a scripted test agent",
        version="1.0.0",
        supported_interfaces=interfaces,
        capabilities=AgentCapabilities(streaming=streaming),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(
                id="script", name="Script", description="does what it is told", tags=["test"]
            )
        ],
    )


class _IgnoresBlocking(DefaultRequestHandler):
    """Answers every SendMessage at once, with the task as it is, even when asked to block."""

    async def on_message_send(self, params: SendMessageRequest, context: Any) -> Task | Message:
        params.configuration.return_immediately = True
        return await super().on_message_send(params, context)


class _RecordHeaders:
    def __init__(self, app: Any, state: AgentState) -> None:
        self.app, self.state = app, state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self.state.requests.append({k.decode(): v.decode() for k, v in scope["headers"]})
        await self.app(scope, receive, send)


class ScriptedAgent:
    """A real a2a-sdk agent server on a free port; `card_json` is its card for registration."""

    def __init__(
        self,
        name: str,
        *,
        streaming: bool = True,
        binding: str = "JSONRPC",
        port: int | None = None,
        version: str = "1.0",
        ignores_blocking: bool = False,
        voice: str = "echo",
        guard: Any = None,
        grpc_interceptors: list[Any] | None = None,
    ) -> None:
        """`guard`: wraps the agent's ASGI app (its own auth in front of it, tests/auth.py);
        `grpc_interceptors` do the same for a gRPC agent."""
        self.name = name
        self.port = port or free_port()
        # binding "GRPC": served with the SDK's gRPC server only, at host:port.
        grpc_only = binding == "GRPC"
        self.url = f"127.0.0.1:{self.port}" if grpc_only else f"http://127.0.0.1:{self.port}"
        self.state = AgentState(voice=voice)
        # version "0.3": the card offers JSON-RPC in A2A 0.3 (the SDK's compatibility mode).
        self.card = agent_card(
            name, self.url, streaming=streaming, binding=binding, version=version
        )
        handler_class = _IgnoresBlocking if ignores_blocking else DefaultRequestHandler
        handler = handler_class(
            agent_executor=ScriptedExecutor(self.state),
            task_store=InMemoryTaskStore(),
            agent_card=self.card,
        )
        self.server: ServerThread | GrpcServerThread
        if grpc_only:
            self.server = GrpcServerThread(
                GrpcHandler(handler), port=self.port, interceptors=grpc_interceptors
            )
            return
        app = Starlette(
            routes=[
                *create_agent_card_routes(self.card),
                *create_jsonrpc_routes(handler, "/", enable_v0_3_compat=version == "0.3"),
                *create_rest_routes(handler, path_prefix="/rest"),
            ]
        )
        served: Any = _RecordHeaders(app, self.state)
        if guard is not None:
            served = guard(served)
        self.server = ServerThread(served, port=self.port, lifespan="off")

    @property
    def card_json(self) -> dict[str, Any]:
        return MessageToDict(self.card)

    def start(self, *, hub_url: str = "", token: str = "") -> ScriptedAgent:
        self.state.hub_url, self.state.token = hub_url, token
        self.server.start()
        return self

    def stop(self) -> None:
        self.server.stop()
