"""A raw inbox connection for tests: the websocket, frames in and out."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import websockets


class Inbox:
    """An inbox agent's websocket to the hub, speaking the frames directly."""

    # Every inbox a test opened, closed after the test (see conftest.py).
    opened: list[Inbox] = []

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.hello: dict[str, Any] = {}
        # Frames that arrived while waiting for the answer to a frame we sent.
        self.pending: list[dict[str, Any]] = []

    @classmethod
    async def open(cls, hub_url: str, slug: str, token: str | None) -> Inbox:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        ws = await websockets.connect(
            hub_url.replace("http://", "ws://") + f"/ws/agents/{slug}/", additional_headers=headers
        )
        inbox = cls(ws)
        cls.opened.append(inbox)
        inbox.hello = await inbox.next()
        return inbox

    async def next(self, within: float = 10.0) -> dict[str, Any]:
        if self.pending:
            return self.pending.pop(0)
        return json.loads(await asyncio.wait_for(self.ws.recv(), within))

    async def next_of(self, kind: str, within: float = 10.0) -> dict[str, Any]:
        """The next frame of type `kind`; other frames are kept for later."""
        for i, frame in enumerate(self.pending):
            if frame["type"] == kind:
                return self.pending.pop(i)
        while True:
            frame = json.loads(await asyncio.wait_for(self.ws.recv(), within))
            if frame["type"] == kind:
                return frame
            self.pending.append(frame)

    async def send(self, frame: dict[str, Any] | str) -> dict[str, Any]:
        """Send a frame and return the hub's answer to it (other frames are kept)."""
        await self.ws.send(frame if isinstance(frame, str) else json.dumps(frame))
        while True:
            reply = json.loads(await asyncio.wait_for(self.ws.recv(), 10.0))
            if reply["type"] in ("ok", "error", "pong"):
                return reply
            self.pending.append(reply)

    async def close(self) -> None:
        await self.ws.close()


async def close_opened_inboxes() -> None:
    """Close every inbox a test opened and wait until the hub has seen each one go (before
    the test database is reset)."""
    from a2a_core.asyncdb import db
    from a2a_core.models import InboxSession
    from tests.a2a_core.protocol.helpers import eventually

    opened, Inbox.opened[:] = list(Inbox.opened), []
    for inbox in opened:
        await inbox.close()

    async def gone() -> bool:
        return not await db(InboxSession.objects.filter(transport="websocket").exists)

    await eventually(gone)


async def ended_by_hub(inbox: Inbox, within: float = 10.0) -> tuple[dict[str, Any], int, str]:
    """Read until the hub closes the connection: (its last error frame, close code, reason).
    Fails if the connection is still open after `within` seconds."""
    error: dict[str, Any] = {}
    try:
        while True:
            frame = await inbox.next(within)
            if frame["type"] == "error":
                error = frame
    except websockets.ConnectionClosed:
        return error, inbox.ws.close_code, inbox.ws.close_reason


async def refusal(hub_url: str, slug: str, token: str) -> tuple[dict[str, Any], int, str]:
    """Connect and expect to be refused: (the error frame, close code, reason)."""
    ws = await websockets.connect(
        hub_url.replace("http://", "ws://") + f"/ws/agents/{slug}/",
        additional_headers={"Authorization": f"Bearer {token}"},
    )
    inbox = Inbox(ws)
    Inbox.opened.append(inbox)
    return await ended_by_hub(inbox)
