"""`HubClient`: what an agent author uses to talk through the hub, on the official a2a-sdk.

    async with HubClient("http://127.0.0.1:8000", token, agent="duc") as hub:
        reviewers = await hub.discover(skill="code-review")
        task = await hub.send_task_request("baron", "Spec the login page", "OAuth + email")
        answer = await hub.request("ledger", "the customer's plan", within=30)
        await hub.broadcast("all", "freeze", "code freeze at 5pm")
        async for delivery in hub.inbox():      # an inbox agent's work
            await delivery.complete("done")

Typed messages are checked against the envelope schemas before they leave (a bad one raises
`ValidationFailed` naming every field) and carry `from: <agent>`. Calls go to
`/a2a/<agent>/` with the a2a-sdk client; broadcasts and knowledge shares to the hub's own
endpoint, which fans them out.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from typing import Any

import httpx
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.client.transports.base import ClientTransport
from a2a.types.a2a_pb2 import (
    AgentCard,
    GetTaskRequest,
    Message,
    SendMessageRequest,
    Task,
    TaskState,
)
from a2a.utils.constants import TransportProtocol
from google.protobuf.json_format import MessageToDict, ParseDict

from a2a_core.client.errors import HubJsonRpcTransport
from a2a_core.client.inbox import Delivery, Inbox
from a2a_core.schemas.a2a import HUB_METADATA, envelope_part_indexes
from a2a_core.schemas.envelopes import (
    ENVELOPE_EXTENSION,
    ENVELOPE_MEDIA_TYPE,
    envelope_json,
    parse_envelope,
)

ENDED = {
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
}


# How long after a request's deadline the hub may take to fail it.
SWEEP_ALLOWANCE = 5.0


class RequestFailed(Exception):
    """A `request` got no response: `task` says how it ended (failed at its deadline...)."""

    def __init__(self, message: str, task: Task) -> None:
        super().__init__(message)
        self.task = task


class HubClient:
    def __init__(self, url: str, token: str, *, agent: str, timeout: float = 60.0) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.agent = agent
        self.http = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=timeout)
        self._clients: dict[tuple[str, bool], Client] = {}
        self._inbox: Inbox | None = None

    async def __aenter__(self) -> HubClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._inbox is not None:
            await self._inbox.close()
        await self.http.aclose()

    # --- finding peers ---------------------------------------------------------------------

    async def discover(
        self,
        *,
        skill: str | None = None,
        tag: str | None = None,
        status: str | None = None,
        q: str | None = None,
        limit: int = 50,
    ) -> list[dict[str, Any]]:
        """Registered agents matching every filter given (skill id, tag, status, text)."""
        params = {"skill": skill, "tag": tag, "status": status, "q": q, "limit": limit}
        response = await self.http.get(
            f"{self.url}/discover", params={k: v for k, v in params.items() if v is not None}
        )
        response.raise_for_status()
        agents: list[dict[str, Any]] = response.json()["agents"]
        return agents

    # --- sending ---------------------------------------------------------------------------

    async def _client(self, to: str, *, streaming: bool = False) -> Client:
        key = (to, streaming)
        if key not in self._clients:
            factory = ClientFactory(ClientConfig(streaming=streaming, httpx_client=self.http))
            factory.register(TransportProtocol.JSONRPC, self._jsonrpc)
            self._clients[key] = await factory.create_from_url(f"{self.url}/a2a/{to}".rstrip("/"))
        return self._clients[key]

    def _jsonrpc(self, card: AgentCard, url: str, config: ClientConfig) -> ClientTransport:
        return HubJsonRpcTransport(self.http, card, url, is_shared_httpx=True)

    def envelope(self, kind: str, payload: dict[str, Any], **fields: Any) -> dict[str, Any]:
        """A checked envelope from this agent (raises `ValidationFailed` naming every field)."""
        data = {"kind": kind, "from": {"agentId": self.agent}, "payload": payload, **fields}
        return envelope_json(parse_envelope({k: v for k, v in data.items() if v is not None}))

    def message(
        self,
        text: str | None = None,
        *,
        envelope: dict[str, Any] | None = None,
        task_id: str | None = None,
        context_id: str | None = None,
        timeout_seconds: float | None = None,
        message_id: str | None = None,
    ) -> Message:
        wire: dict[str, Any] = {"messageId": message_id or str(uuid.uuid4()), "role": "ROLE_USER"}
        parts: list[dict[str, Any]] = [{"text": text}] if text else []
        if envelope is not None:
            parts.append({"data": envelope, "mediaType": ENVELOPE_MEDIA_TYPE})
            wire["extensions"] = [ENVELOPE_EXTENSION]
        if not parts:
            raise ValueError("a message needs text or an envelope")
        wire["parts"] = parts
        if task_id:
            wire["taskId"] = task_id
        if context_id:
            wire["contextId"] = context_id
        if timeout_seconds is not None:
            wire["metadata"] = {HUB_METADATA: {"timeoutSeconds": timeout_seconds}}
        return ParseDict(wire, Message())

    async def send(
        self,
        to: str,
        text: str | None = None,
        *,
        envelope: dict[str, Any] | None = None,
        task_id: str | None = None,
        context_id: str | None = None,
        wait: bool = True,
        timeout_seconds: float | None = None,
        message_id: str | None = None,
    ) -> Task | Message:
        """SendMessage to `to` through the hub. `wait`: until the task ends or needs input
        (at most the hub's timeout); otherwise at once with the submitted task."""
        request = SendMessageRequest(
            message=self.message(
                text,
                envelope=envelope,
                task_id=task_id,
                context_id=context_id,
                timeout_seconds=timeout_seconds,
                message_id=message_id,
            )
        )
        request.configuration.return_immediately = not wait
        async for event in (await self._client(to)).send_message(request):
            return event.task if event.HasField("task") else event.message
        raise ConnectionError(f"the hub answered nothing for the message to {to}")

    async def stream(
        self, to: str, text: str | None = None, *, envelope: dict[str, Any] | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        """SendStreamingMessage: the task, then its status and artifact updates (ProtoJSON)."""
        request = SendMessageRequest(message=self.message(text, envelope=envelope))
        async for event in (await self._client(to, streaming=True)).send_message(request):
            yield MessageToDict(event)

    async def get_task(self, to: str, task_id: str) -> Task:
        return await (await self._client(to)).get_task(GetTaskRequest(id=task_id))

    async def send_task_request(
        self,
        to: str,
        title: str,
        description: str = "",
        *,
        task_type: str = "implementation",
        complexity: str = "medium",
        acceptance_criteria: Sequence[str] = (),
        files: Sequence[str] = (),
        deadline: datetime | None = None,
        priority: str = "normal",
        wait: bool = False,
    ) -> Task | Message:
        payload = {
            "title": title,
            "description": description,
            "taskType": task_type,
            "complexity": complexity,
            "acceptanceCriteria": list(acceptance_criteria),
            "context": {"files": list(files)},
            "deadline": deadline.isoformat() if deadline else None,
        }
        envelope = self.envelope("task_request", _present(payload), priority=priority)
        return await self.send(to, envelope=envelope, wait=wait)

    async def send_review_request(
        self,
        to: str,
        title: str,
        files: Sequence[str],
        *,
        review_level: str | None = None,
        branch: str | None = None,
        notes: str | None = None,
        priority: str = "normal",
        wait: bool = False,
    ) -> Task | Message:
        payload = {
            "title": title,
            "files": list(files),
            "reviewLevel": review_level,
            "branch": branch,
            "priorReviewNotes": notes,
            "authorAgent": self.agent,
        }
        envelope = self.envelope("review_request", _present(payload), priority=priority)
        return await self.send(to, envelope=envelope, wait=wait)

    # --- request / response (seed 004) -----------------------------------------------------

    async def request(
        self,
        to: str,
        text: str | None = None,
        *,
        action: str | None = None,
        data: Any = None,
        within: float = 30.0,
    ) -> dict[str, Any]:
        """Ask `to` and wait for its `response` (by correlationId) up to `within` seconds;
        return the response's payload. Raises `RequestFailed` when none came in time (the
        request's task failed at its deadline; an answer after it is kept, flagged late)."""
        envelope = self.envelope(
            "request",
            _present({"text": text, "action": action, "data": data}),
            correlationId=str(uuid.uuid4()),
            expectsResponse=True,
        )
        result = await self.send(to, envelope=envelope, timeout_seconds=within)
        if isinstance(result, Message):
            return _response_payload(MessageToDict(result)) or {}
        task = result
        # The hub fails the task at its deadline; allow for the sweep that does it.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within + SWEEP_ALLOWANCE):
                while task.status.state not in ENDED:
                    await asyncio.sleep(0.5)
                    task = await self.get_task(to, task.id)
        if task.status.state == TaskState.TASK_STATE_COMPLETED:
            found = _response_payload(MessageToDict(task.status.message))
            if found is not None:
                return found
        reason = " ".join(p.text for p in task.status.message.parts if p.text) or "no response"
        raise RequestFailed(f"{to} did not respond: {reason}", task)

    async def respond(
        self,
        to: str,
        correlation_id: str,
        *,
        text: str | None = None,
        data: Any = None,
        error: str | None = None,
    ) -> Task | Message:
        """Send a `response` to an earlier request from `to` (seed 004 `sendA2AResponse`);
        the hub matches it to the request by correlationId. Inbox agents answering a
        delivery use `delivery.respond(...)` instead."""
        envelope = self.envelope(
            "response",
            _present({"text": text, "data": data, "error": error}),
            correlationId=correlation_id,
        )
        return await self.send(to, envelope=envelope)

    # --- many recipients -------------------------------------------------------------------

    async def _fan_out(self, envelope: dict[str, Any]) -> dict[str, Any]:
        answer = await self.send("", envelope=envelope)
        parts = MessageToDict(answer).get("parts") or []
        found: dict[str, Any] = next((p["data"] for p in parts if "data" in p), {})
        return found

    async def share_knowledge(
        self,
        topic: str,
        *,
        relevant_to: Sequence[str],
        discovery: str | None = None,
        data_type: str | None = None,
        data: Any = None,
        priority: str = "normal",
    ) -> dict[str, Any]:
        """Share with the agents named; returns where it went ({"deliveries", "unknown"})."""
        payload = {
            "topic": topic,
            "discovery": discovery,
            "dataType": data_type,
            "data": data,
            "relevantTo": list(relevant_to),
        }
        return await self._fan_out(
            self.envelope("knowledge_share", _present(payload), priority=priority)
        )

    async def broadcast(
        self,
        scope: str,
        topic: str,
        message: str,
        *,
        urgency: str = "fyi",
        priority: str = "normal",
    ) -> dict[str, Any]:
        """Tell every agent in `scope` (`all`, `role:x`, `skill:x`, `tag:x`, `agents:a,b`)."""
        payload = {"scope": scope, "topic": topic, "message": message, "urgency": urgency}
        return await self._fan_out(self.envelope("broadcast", payload, priority=priority))

    # --- an inbox agent's side -------------------------------------------------------------

    async def inbox(self) -> AsyncIterator[Delivery]:
        """This agent's deliveries, over a websocket held open (and reopened) for it. Each is
        acknowledged once the loop body that handled it finishes."""
        if self._inbox is None:
            self._inbox = Inbox(self.url, self.agent, self.token)
        async for delivery in self._inbox.deliveries():
            yield delivery

    async def ask_human(
        self, task_id: str, question: str, *, priority: str = "normal"
    ) -> dict[str, Any]:
        """Put a question about task `task_id` (one this agent works on) to the humans at the
        hub; their answer arrives as the task's next delivery."""
        frame = {
            "type": "status",
            "taskId": task_id,
            "state": "input-required",
            "text": question,
            "askHuman": True,
            "priority": priority,
        }
        if self._inbox is not None:
            return await self._inbox.request(frame)
        response = await self.http.post(f"{self.url}/inbox/{self.agent}/", json=frame)
        answer: dict[str, Any] = response.json()
        return answer


def _present(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None and v != [] and v != {"files": []}}


def _response_payload(message: dict[str, Any]) -> dict[str, Any] | None:
    for index in envelope_part_indexes(message):
        data = message["parts"][index].get("data") or {}
        if data.get("kind") == "response":
            payload: dict[str, Any] = data.get("payload") or {}
            return payload
    return None
