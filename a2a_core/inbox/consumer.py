"""The inbox websocket: `/ws/agents/<agent>/`, authenticated with the agent's bearer token.

On connect the hub sends `hello`, then every delivery that is due — including those sent
before and never acknowledged (a reconnect gets them again). New deliveries are sent as they
are committed (an `inbox.wake` event on the agent's group), at most HUB_INBOX_WINDOW
unacknowledged at a time; one overdue for its acknowledgement is sent again. Deliveries are
claimed with the token the connection was let in with: once that token is rotated, or the
agent suspended or deleted, no more are claimed for it, and the connection is closed saying
why. See `a2a_core.inbox.protocol` for the frames.

Close codes: 4401 no or unknown token (or, on an open connection, the token was rotated or the
agent deleted), 4403 the token is another agent's or lacks the a2a:receive scope, or the agent
is suspended, 4404 no such agent, 4409 the agent is an endpoint agent, 1009 a frame over the
size limit. Each refusal is an `error` frame first, then the close with the code and a reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from a2a_core.asyncdb import db
from a2a_core.errors import HubError, NotFound, PermissionDenied, Unauthenticated
from a2a_core.inbox.access import Session, inbox_agent, session_close, session_open
from a2a_core.inbox.protocol import Ack, ArtifactChunk, Status, apply, error_frame, parse, ref_of
from a2a_core.logging import get_logger
from a2a_core.models import Agent, Transport
from a2a_core.schemas.events import InboxCanceled, InboxWake, parse_event
from a2a_core.services.inbox import (
    Claim,
    inbox_acks,
    inbox_claims,
    inbox_connect,
    inbox_disconnect,
    inbox_group,
    inbox_seen,
    inbox_still_unacked,
    inbox_waiting,
)
from a2a_core.sockets import Consumer
from a2a_core.storage.batching import Batcher

log = get_logger("inbox")

CLOSE_CODES = {Unauthenticated: 4401, PermissionDenied: 4403, NotFound: 4404}
# RFC 6455: a close frame's reason is at most 123 bytes of UTF-8.
MAX_REASON_BYTES = 123

# Every connection's claims and acknowledgements share transactions (group commit).
_claims: Batcher[Claim, list[dict[str, Any]]] = Batcher(inbox_claims)
_acks: Batcher[tuple[int, Sequence[int]], int] = Batcher(inbox_acks)


def bearer(headers: list[tuple[bytes, bytes]]) -> str:
    for name, value in headers:
        if name.lower() == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            return token.strip() if scheme.lower() == "bearer" else ""
    return ""


def close_code(exc: HubError) -> int:
    return next((code for cls, code in CLOSE_CODES.items() if isinstance(exc, cls)), 4409)


def close_reason(exc: HubError) -> str:
    return exc.message.encode()[:MAX_REASON_BYTES].decode(errors="ignore")


class InboxConsumer(Consumer):
    agent: Agent | None = None
    session: Session | None = None
    pump: asyncio.Task[None] | None = None
    acking: asyncio.Task[None] | None = None
    # Set once the hub closed the connection: nothing more is sent on it.
    closed = False

    async def connect(self) -> None:
        slug = self.scope["url_route"]["kwargs"]["slug"]
        await self.accept()
        try:
            agent = await db(inbox_agent, bearer(self.scope.get("headers", [])), slug)
        except HubError as exc:
            await self._refuse(exc)
            return
        self.agent = agent
        self.session = Session(agent.pk, agent.slug, agent.token_hash or "", self._refuse)
        session_open(self.session)
        self.wake = asyncio.Event()
        # Deliveries sent on this connection and not acknowledged yet: delivery id -> task id.
        self.unacked: dict[int, str | None] = {}
        self.acks: list[Ack] = []
        await self.channel_layer.group_add(inbox_group(agent.pk), self.channel_name)
        await db(
            inbox_connect,
            agent_id=agent.pk,
            channel=self.channel_name,
            transport=Transport.WEBSOCKET,
        )
        waiting = await db(inbox_waiting, agent_id=agent.pk)
        await self._send(
            {
                "type": "hello",
                "agent": agent.slug,
                "waiting": waiting,
                "ackSeconds": settings.HUB_INBOX_ACK_SECONDS,
                "heartbeatSeconds": settings.HUB_INBOX_HEARTBEAT_SECONDS,
                "window": settings.HUB_INBOX_WINDOW,
            }
        )
        if self.closed:  # ended while connecting
            return
        self.pump = asyncio.get_running_loop().create_task(
            self._deliver(), name=f"inbox-{agent.slug}"
        )

    async def disconnect(self, code: int) -> None:
        agent = self.agent
        if agent is None:
            return
        if self.session is not None:
            session_close(self.session)
        if self.pump is not None:
            self.pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.pump
        if self.acking is not None:  # acknowledgements received are still written
            with contextlib.suppress(Exception):
                await self.acking
        await self.channel_layer.group_discard(inbox_group(agent.pk), self.channel_name)
        await db(inbox_disconnect, agent_id=agent.pk, channel=self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.agent is None or self.closed:
            return
        data = text_data if text_data is not None else bytes_data or b""
        if len(data) > settings.HUB_MAX_BODY_BYTES:
            await self._send({"type": "error", "code": "too_large", "message": "frame too large"})
            await self.close(code=1009)
            return
        try:
            frame = parse(data)
        except HubError as exc:
            await self._send(error_frame(exc, ref_of(data)))
            return
        if isinstance(frame, Ack):
            # Acknowledgements are written in batches, while the next frames are read.
            self.acks.append(frame)
            if self.acking is None or self.acking.done():
                self.acking = asyncio.get_running_loop().create_task(self._write_acks())
            return
        reply = await apply(self.agent, frame)
        if reply["type"] == "ok" and isinstance(frame, Status | ArtifactChunk):
            # Reporting on a task acknowledged its deliveries.
            self._settled([pk for pk, task in self.unacked.items() if task == frame.task_id])
        await self._send(reply)

    async def _write_acks(self) -> None:
        assert self.agent is not None
        while self.acks:
            batch, self.acks = self.acks, []
            results = await asyncio.gather(
                *(_acks.submit((self.agent.pk, a.ids)) for a in batch), return_exceptions=True
            )
            for frame, result in zip(batch, results, strict=True):
                if isinstance(result, HubError):
                    answer = error_frame(result, frame.ref)
                elif isinstance(result, Exception):
                    log.error("an acknowledgement failed", exc_info=result)
                    answer = error_frame(
                        HubError("the hub could not record this acknowledgement; send it again"),
                        frame.ref,
                    )
                elif isinstance(result, BaseException):
                    raise result
                else:
                    self._settled(frame.ids)
                    answer = {"type": "ok", "ref": frame.ref, "acknowledged": result}
                with contextlib.suppress(Exception):  # the agent may have gone meanwhile
                    await self._send(answer)

    def _settled(self, delivery_ids: list[int]) -> None:
        full = len(self.unacked) >= settings.HUB_INBOX_WINDOW
        for pk in delivery_ids:
            self.unacked.pop(pk, None)
        if full and len(self.unacked) < settings.HUB_INBOX_WINDOW:
            self.wake.set()

    async def hub_event(self, message: dict[str, Any]) -> None:
        """An event on the agent's group: new deliveries, or a task it works on canceled."""
        event = parse_event(message)
        if isinstance(event, InboxWake):
            self.wake.set()
        elif isinstance(event, InboxCanceled):
            await self._send({"type": "canceled", "taskId": event.task_id})

    async def _send(self, frame: dict[str, Any]) -> None:
        if self.closed:
            return
        await self.send(text_data=json.dumps(frame, default=str))

    async def _refuse(self, exc: HubError) -> None:
        """Tell the agent why it may not (or no longer) hold this connection, and close it.
        Deliveries sent and not acknowledged go out again on its next connection."""
        if self.pump is not None:
            self.pump.cancel()
        with contextlib.suppress(Exception):
            await self._send(error_frame(exc))
        self.closed = True
        await self.close(code=close_code(exc), reason=close_reason(exc))

    async def _deliver(self) -> None:
        """Send what is queued, whenever woken, keeping at most HUB_INBOX_WINDOW out
        unacknowledged. The first pass after connecting resends everything unacknowledged;
        every heartbeat, report in and resend what is overdue."""
        assert self.agent is not None and self.session is not None
        agent_id, token = self.agent.pk, self.session.token_hash
        window = settings.HUB_INBOX_WINDOW
        heartbeat = settings.HUB_INBOX_HEARTBEAT_SECONDS
        ack_seconds = settings.HUB_INBOX_ACK_SECONDS
        loop = asyncio.get_running_loop()
        next_beat = loop.time() + min(heartbeat, ack_seconds / 2)
        frames: list[dict[str, Any]] = []
        first = True
        while True:
            try:
                if first:
                    frames = await _claims.submit(
                        Claim(agent_id, window, unacked=True, token_hash=token)
                    )
                    first = False
                if not await self._send_all(frames):
                    return
                now = loop.time()
                if now >= next_beat:
                    next_beat = now + min(heartbeat, ack_seconds / 2)
                    frames = await self._heartbeat(ack_seconds)
                    continue
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(next_beat - now + 0.01):
                        await self.wake.wait()
                self.wake.clear()
                frames = await _claims.submit(
                    Claim(agent_id, window - len(self.unacked), token_hash=token)
                )
            except asyncio.CancelledError:
                raise
            except HubError as exc:  # its token rotated, or the agent suspended or deleted
                self.pump = None  # this task: ending the session must not cancel it midway
                await self._refuse(exc)
                return
            except Exception:
                log.warning(
                    "inbox delivery pass failed", exc_info=True, extra={"agent_id": agent_id}
                )
                frames = []
                await asyncio.sleep(1.0)

    async def _send_all(self, frames: list[dict[str, Any]]) -> bool:
        """Send deliveries; False when the connection is gone (they stay unacknowledged and
        go out again on the next connection)."""
        try:
            for frame in frames:
                self.unacked[frame["deliveryId"]] = frame["taskId"]
                await self._send(frame)
        except Exception:
            log.debug("inbox connection gone while sending", exc_info=True)
            return False
        return True

    async def _heartbeat(self, ack_seconds: float) -> list[dict[str, Any]]:
        """Report the session alive, forget deliveries acknowledged elsewhere, and claim the
        ones whose acknowledgement is overdue — and any queued one whose wake-up event did not
        reach this process (events are best effort; the database is the truth)."""
        assert self.agent is not None
        await db(inbox_seen, channels=[self.channel_name])
        still = await db(
            inbox_still_unacked, agent_id=self.agent.pk, delivery_ids=list(self.unacked)
        )
        self.unacked = {pk: task for pk, task in self.unacked.items() if pk in still}
        overdue = timezone.now() - timedelta(seconds=ack_seconds)
        assert self.session is not None
        return await _claims.submit(
            Claim(
                self.agent.pk,
                settings.HUB_INBOX_WINDOW,
                pending=True,
                overdue_before=overdue,
                token_hash=self.session.token_hash,
            )
        )
