"""The long-poll fallback for inbox agents that cannot hold a websocket: `/inbox/<agent>/`.

GET  /inbox/<agent>/?wait=25   the deliveries due (waits up to `wait` seconds, at most 55, for
                               one to arrive): {"deliveries": [delivery frames]}
POST /inbox/<agent>/           one frame ({"type": "ack", ...}) or {"frames": [...]} (at most
                               100): the answer frame, or {"results": [answer frames]}

Same frames and at-least-once rules as the websocket (`a2a_core.inbox.protocol`). The agent
is online while it keeps polling; the first poll after a gap (HUB_INBOX_POLL_GRACE) gets every
unacknowledged delivery again. Errors are JSON: {"error": {"code", "message", "errors"?}} with
the HTTP status that says why (400, 401, 403, 404, 409, 413). A poll waiting for work when the
agent's token is rotated, or the agent suspended or deleted, ends at once with that error.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from datetime import timedelta
from typing import Any

from channels.layers import get_channel_layer
from django.conf import settings
from django.utils import timezone
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from a2a_core.asyncdb import db
from a2a_core.errors import (
    FieldProblem,
    HubError,
    NotFound,
    PermissionDenied,
    Unauthenticated,
    ValidationFailed,
)
from a2a_core.inbox.access import Session, WrongMode, inbox_agent, session_close, session_open
from a2a_core.inbox.protocol import answer
from a2a_core.models import Agent, Transport
from a2a_core.services.inbox import inbox_claim, inbox_connect, inbox_group
from a2a_core.tokens import bearer_token

MAX_WAIT_SECONDS = 55.0
MAX_FRAMES = 100
STATUS = {Unauthenticated: 401, PermissionDenied: 403, NotFound: 404, WrongMode: 409}


def _status(exc: HubError) -> int:
    return next((code for cls, code in STATUS.items() if isinstance(exc, cls)), 400)


def _error(exc: HubError, status: int | None = None) -> JSONResponse:
    body: dict[str, Any] = {"code": exc.code, "message": exc.message}
    if isinstance(exc, ValidationFailed) and exc.problems:
        body["errors"] = [p.as_dict() for p in exc.problems]
    headers = (
        {"WWW-Authenticate": 'Bearer realm="a2a-hub"'} if isinstance(exc, Unauthenticated) else {}
    )
    return JSONResponse({"error": body}, status_code=status or _status(exc), headers=headers)


async def _agent(request: Request) -> Agent:
    return await db(inbox_agent, bearer_token(request.headers) or "", request.path_params["slug"])


def _wait_seconds(request: Request) -> float:
    raw = request.query_params.get("wait", "25")
    try:
        wait = float(raw)
    except ValueError:
        wait = -1.0
    if not 0 <= wait <= MAX_WAIT_SECONDS:
        raise ValidationFailed(
            "invalid wait",
            [FieldProblem("wait", f"seconds between 0 and {MAX_WAIT_SECONDS:g}, got {raw!r}")],
        )
    return wait


async def _claim(agent: Agent, resend_unacked: bool) -> list[dict[str, Any]]:
    """The deliveries due; raises why none may be claimed any more when the poll's token was
    rotated or the agent suspended or deleted (checked as they are claimed)."""
    overdue = timezone.now() - timedelta(seconds=settings.HUB_INBOX_ACK_SECONDS)
    frames: list[dict[str, Any]] = await db(
        inbox_claim,
        agent_id=agent.pk,
        limit=settings.HUB_INBOX_WINDOW,
        overdue_before=overdue,
        unacked=resend_unacked,
        token_hash=agent.token_hash or "",
    )
    return frames


async def poll(request: Request) -> Response:
    try:
        agent = await _agent(request)
        wait = _wait_seconds(request)
    except HubError as exc:
        return _error(exc)
    returning = not await db(
        inbox_connect, agent_id=agent.pk, channel=f"poll:{agent.pk}", transport=Transport.POLL
    )
    try:
        frames = await _claim(agent, resend_unacked=not returning)
    except HubError as exc:
        return _error(exc)
    layer = get_channel_layer()
    if frames or wait == 0 or layer is None:
        return JSONResponse({"deliveries": frames})
    channel = await layer.new_channel()
    revoked: asyncio.Future[HubError] = asyncio.get_running_loop().create_future()

    async def end(exc: HubError) -> None:
        if not revoked.done():
            revoked.set_result(exc)

    session = Session(agent.pk, agent.slug, agent.token_hash or "", end)
    session_open(session)
    await layer.group_add(inbox_group(agent.pk), channel)
    try:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait):
                while not frames:
                    woken = asyncio.ensure_future(layer.receive(channel))
                    try:
                        await asyncio.wait([woken, revoked], return_when=asyncio.FIRST_COMPLETED)
                    finally:
                        woken.cancel()
                    if revoked.done():
                        return _error(revoked.result())
                    try:
                        frames = await _claim(agent, resend_unacked=False)
                    except HubError as exc:
                        return _error(exc)
    finally:
        session_close(session)
        await layer.group_discard(inbox_group(agent.pk), channel)
    return JSONResponse({"deliveries": frames})


async def post(request: Request) -> Response:
    try:
        agent = await _agent(request)
    except HubError as exc:
        return _error(exc)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > settings.HUB_MAX_BODY_BYTES:
            limit = settings.HUB_MAX_BODY_BYTES
            problem = FieldProblem("", f"the body may be {limit} bytes at most")
            return _error(ValidationFailed("request too large", [problem]), 413)
        chunks.append(chunk)
    body = b"".join(chunks)
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as exc:  # not JSON, not UTF-8, nested too deep
        return _error(ValidationFailed("malformed body", [FieldProblem("", f"not JSON: {exc}")]))
    if isinstance(data, dict) and "frames" in data:
        frames = data["frames"]
        if not isinstance(frames, list) or not 1 <= len(frames) <= MAX_FRAMES:
            problem = FieldProblem("frames", f"a list of 1 to {MAX_FRAMES} frames")
            return _error(ValidationFailed("invalid frames", [problem]))
        results = [await answer(agent, frame) for frame in frames]
        return JSONResponse({"results": results})
    return JSONResponse(await answer(agent, data))


async def inbox_endpoint(request: Request) -> Response:
    if request.method == "GET":
        return await poll(request)
    return await post(request)
