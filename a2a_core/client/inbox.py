"""An inbox agent's side of the inbox websocket: deliveries in, reports and acks out.

`Inbox` keeps the websocket open (reconnecting with backoff when it drops) and hands out
`Delivery` objects. Each frame sent carries a `ref`; the hub's `ok` or `error` answer resolves
it, so every report either succeeds or raises `HubFrameError` with the hub's reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import websockets

from a2a_core.schemas.a2a import text_of
from a2a_core.schemas.envelopes import ENVELOPE_MEDIA_TYPE, envelope_json, parse_envelope

RECONNECT_DELAYS = (0.5, 1.0, 2.0, 5.0, 10.0)
ANSWER_SECONDS = 30.0


class HubFrameError(Exception):
    """The hub refused a frame: `code` says why (`invalid`, `not_found`,
    `illegal_transition`...), `errors` lists field problems."""

    def __init__(self, frame: dict[str, Any]) -> None:
        super().__init__(f"{frame.get('code')}: {frame.get('message')}")
        self.code = str(frame.get("code", ""))
        self.errors: list[dict[str, str]] = frame.get("errors") or []
        self.details: dict[str, Any] = frame.get("details") or {}


class InboxClosed(Exception):
    """The hub refused the connection (bad token, not an inbox agent...): not retried."""

    def __init__(self, frame: dict[str, Any], code: int | None) -> None:
        super().__init__(f"{frame.get('code')}: {frame.get('message')} (close code {code})")
        self.code = str(frame.get("code", ""))


@dataclass
class Delivery:
    """One message for the agent. Report on its task with the methods below; a delivery of a
    broadcast or knowledge share has no task — `ack()` it once handled."""

    inbox: Inbox
    frame: dict[str, Any]
    acked: bool = field(default=False, init=False)

    @property
    def id(self) -> int:
        return int(self.frame["deliveryId"])

    @property
    def sender(self) -> str:
        return str(self.frame.get("from", ""))

    @property
    def kind(self) -> str:
        return str(self.frame.get("kind", ""))

    @property
    def envelope(self) -> dict[str, Any] | None:
        return self.frame.get("envelope")

    @property
    def task_id(self) -> str | None:
        return self.frame.get("taskId")

    @property
    def message(self) -> dict[str, Any]:
        return dict(self.frame.get("message") or {})

    @property
    def text(self) -> str:
        return text_of(self.message.get("parts") or [])

    @property
    def attempt(self) -> int:
        return int(self.frame.get("attempt", 1))

    async def ack(self) -> None:
        if not self.acked:
            await self.inbox.request({"type": "ack", "deliveryId": self.id})
            self.acked = True

    async def _status(self, state: str, **fields: Any) -> dict[str, Any]:
        if self.task_id is None:
            raise ValueError("this delivery has no task to report on (a broadcast?): ack() it")
        answer = await self.inbox.request(
            {"type": "status", "taskId": self.task_id, "state": state, **fields}
        )
        self.acked = True
        return answer

    async def working(self, text: str | None = None) -> dict[str, Any]:
        return await self._status("working", **({"text": text} if text else {}))

    async def artifact(
        self,
        text: str | None = None,
        *,
        parts: list[dict[str, Any]] | None = None,
        artifact_id: str | None = None,
        name: str | None = None,
        append: bool = False,
        last_chunk: bool = False,
    ) -> dict[str, Any]:
        """Add an artifact, or (with `append`) a chunk to the artifact `artifact_id`."""
        if self.task_id is None:
            raise ValueError("this delivery has no task to add an artifact to")
        frame: dict[str, Any] = {
            "type": "artifact",
            "taskId": self.task_id,
            "parts": parts if parts is not None else [{"text": text or ""}],
            "append": append,
            "lastChunk": last_chunk,
        }
        if artifact_id:
            frame["artifactId"] = artifact_id
        if name:
            frame["name"] = name
        answer = await self.inbox.request(frame)
        self.acked = True
        return answer

    async def complete(
        self, text: str | None = None, *, parts: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        return await self._status("completed", **_message(text, parts))

    async def fail(self, reason: str) -> dict[str, Any]:
        return await self._status("failed", text=reason)

    async def reject(self, reason: str) -> dict[str, Any]:
        return await self._status("rejected", text=reason)

    async def ask(self, question: str) -> dict[str, Any]:
        """Ask the caller (input-required); its answer arrives as the task's next delivery."""
        return await self._status("input-required", text=question)

    async def ask_human(self, question: str, *, priority: str = "normal") -> dict[str, Any]:
        """Ask the humans operating the hub; their answer arrives as the task's next delivery."""
        return await self._status("input-required", text=question, askHuman=True, priority=priority)

    async def respond(
        self, *, text: str | None = None, data: Any = None, error: str | None = None
    ) -> dict[str, Any]:
        """Answer a `request` (seed 004): complete the task with a `response` envelope carrying
        the request's correlationId."""
        correlation_id = (self.envelope or {}).get("correlationId")
        if not correlation_id:
            raise ValueError("this delivery is not a request with a correlationId")
        payload = {k: v for k, v in {"text": text, "data": data, "error": error}.items() if v}
        envelope = envelope_json(
            parse_envelope(
                {"kind": "response", "correlationId": correlation_id, "payload": payload}
            )
        )
        return await self.complete(parts=[{"data": envelope, "mediaType": ENVELOPE_MEDIA_TYPE}])


def _message(text: str | None, parts: list[dict[str, Any]] | None) -> dict[str, Any]:
    if parts is not None:
        return {"parts": parts}
    return {"text": text} if text else {}


class Inbox:
    """The websocket to `/ws/agents/<agent>/`. Use `deliveries()` to receive."""

    def __init__(self, url: str, agent: str, token: str) -> None:
        base = url.rstrip("/").replace("https://", "wss://").replace("http://", "ws://")
        self.url = f"{base}/ws/agents/{agent}/"
        self.token = token
        self.hello: dict[str, Any] = {}
        self.canceled: set[str] = set()
        self._ws: Any = None
        self._refs = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._deliveries: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._reader: asyncio.Task[None] | None = None
        self._reconnecting: asyncio.Task[None] | None = None
        self._connected = asyncio.Event()
        self._closing = False
        self._fatal: InboxClosed | None = None

    async def connect(self) -> None:
        ws = await websockets.connect(
            self.url, additional_headers={"Authorization": f"Bearer {self.token}"}
        )
        first = json.loads(await ws.recv())
        if first.get("type") != "hello":
            with contextlib.suppress(websockets.ConnectionClosed):
                await ws.recv()
            code = ws.close_code
            await ws.close()
            raise InboxClosed(first, code)
        self._ws, self.hello = ws, first
        self._connected.set()
        self._reader = asyncio.get_running_loop().create_task(self._read(ws))

    async def _read(self, ws: Any) -> None:
        try:
            async for raw in ws:
                frame = json.loads(raw)
                kind = frame.get("type")
                if kind == "delivery":
                    await self._deliveries.put(frame)
                elif kind == "canceled":
                    self.canceled.add(str(frame.get("taskId")))
                elif (future := self._waiting.pop(frame.get("ref"), None)) and not future.done():
                    future.set_result(frame)
        except websockets.ConnectionClosed:
            pass
        finally:
            self._connected.clear()
            for future in self._waiting.values():
                if not future.done():
                    future.set_exception(ConnectionError("the inbox connection dropped"))
            self._waiting.clear()
            if not self._closing:
                self._reconnecting = asyncio.get_running_loop().create_task(self._reconnect())

    async def _reconnect(self) -> None:
        for delay in itertools.chain(RECONNECT_DELAYS, itertools.repeat(RECONNECT_DELAYS[-1])):
            if self._closing:
                return
            await asyncio.sleep(delay)
            try:
                await self.connect()
                return
            except InboxClosed as exc:  # refused for good (a rotated token...): stop
                self._fatal = exc
                await self._deliveries.put({})
                return
            except (OSError, websockets.WebSocketException):
                continue

    async def request(self, frame: dict[str, Any]) -> dict[str, Any]:
        """Send a frame and wait (at most ANSWER_SECONDS) for the hub's answer; raise
        `HubFrameError` if it refuses the frame."""
        async with asyncio.timeout(ANSWER_SECONDS):
            await self._connected.wait()
            ref = next(self._refs)
            future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
            self._waiting[ref] = future
            await self._ws.send(json.dumps({**frame, "ref": ref}))
            answer = await future
        if answer.get("type") == "error":
            raise HubFrameError(answer)
        return answer

    async def deliveries(self) -> AsyncIterator[Delivery]:
        """Deliveries as they come. Each is acknowledged when the loop body that handled it
        finishes (unless it was reported on already); if the body raises, it is not — the hub
        sends it again later."""
        if self._ws is None:
            await self.connect()
        while True:
            frame = await self._deliveries.get()
            if self._fatal is not None:
                raise self._fatal
            delivery = Delivery(self, frame)
            yield delivery
            if not delivery.acked:
                await delivery.ack()

    async def close(self) -> None:
        self._closing = True
        if self._reconnecting is not None:
            self._reconnecting.cancel()
        if self._ws is not None:
            await self._ws.close()
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
