"""A websocket consumer whose `disconnect` runs once, however its connection ends.

Channels calls `disconnect` when the server reports the client gone (`websocket.disconnect`).
But when a send finds the socket already closed — the client dropped while the consumer was
answering — the ASGI server ends the consumer with that error instead, and no such message
comes (uvicorn does so silently). What `disconnect` undoes (a recorded inbox session, a place
in the live relay, a background task) would then outlive the connection.
"""

from __future__ import annotations

from typing import Any

from channels.generic.websocket import AsyncWebsocketConsumer

ABNORMAL_CLOSURE = 1006  # RFC 6455: the connection ended without a closing handshake


class Consumer(AsyncWebsocketConsumer):
    _disconnected = False

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            if not self._disconnected:
                self._disconnected = True
                await self.disconnect(ABNORMAL_CLOSURE)

    async def websocket_disconnect(self, message: dict[str, Any]) -> None:
        self._disconnected = True
        await super().websocket_disconnect(message)
