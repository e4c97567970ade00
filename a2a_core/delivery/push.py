"""A2A push notifications: the config methods agents call, and the sender.

Each event of a task's log (a status or artifact update) is POSTed to every config of the task
as the A2A `StreamResponse` JSON of that event (`{"statusUpdate": {...}}` or
`{"artifactUpdate": {...}}`), the same object SubscribeToTask streams and the A2A spec names as
the push notification payload. Headers: `Content-Type: application/json`, the config's
`Authorization: <scheme> <credentials>` when it has one, and, when it has a token (the A2A spec
makes it optional), `X-A2A-Notification-Token: <token>` as the spec says plus `X-A2A-Signature`
(see `a2a_core.client.webhooks`), an HMAC of the body keyed by the token.

Where a URL points is checked when the config is created (refused there, whatever the
spelling of the address) and again before each POST, on the addresses the host resolves to
then, and the POST connects to a checked address (see `a2a_core.delivery.ssrf`); a host that
does not resolve, or resolves to an address the hub may not POST to, is a failed attempt like
any other, its reason kept on the config.

Delivery is at least once and in order per config: event n+1 is not sent before event n was
accepted (2xx) or given up on. Failures are retried with exponential backoff; redirects are
not followed. Progress is stored on the config, so it survives restarts, and each config is
claimed by one worker process at a time (see `a2a_core.services.push.push_claim`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import httpx
from a2a.types.a2a_pb2 import (
    AuthenticationInfo,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    TaskPushNotificationConfig,
)
from django.conf import settings

from a2a_core.asyncdb import db
from a2a_core.client.webhooks import HEADER, TOKEN_HEADER, sign
from a2a_core.delivery.ssrf import UnsafeTarget, check_new, resolve
from a2a_core.errors import FieldProblem, ValidationFailed
from a2a_core.logging import get_logger
from a2a_core.models import Agent, PushNotificationConfig, TaskEventKind
from a2a_core.services import push as service

log = get_logger("push")

# Configs sent to at the same time by one process; one slow webhook holds one slot.
CONCURRENCY = 32
# Events read per config at a time.
BATCH = 20
# A claim outlives one POST by this much; a worker that dies mid-send frees its configs then.
LEASE_MARGIN_SECONDS = 30.0
DELIVERED_KINDS = frozenset({TaskEventKind.STATUS, TaskEventKind.ARTIFACT})


# --- the config methods -----------------------------------------------------------------------


def _wire(row: PushNotificationConfig) -> TaskPushNotificationConfig:
    config = TaskPushNotificationConfig(
        id=row.config_id, task_id=row.task_id, url=row.url, token=row.token
    )
    if row.auth_scheme:
        config.authentication.CopyFrom(
            AuthenticationInfo(scheme=row.auth_scheme, credentials=row.auth_credentials)
        )
    return config


async def config_checked(
    request: TaskPushNotificationConfig, *, task_id: str | None = None
) -> service.PushConfigInput:
    """Check a config's fields, and where its URL points as a POST made now would (raises
    `ValidationFailed`): the host is resolved with the resolver the sender uses, so every
    spelling of a refused address is refused here. A host that does not resolve yet is
    accepted; it is resolved and checked again before each POST."""
    auth = request.authentication
    config = service.push_config_check(
        task_id=task_id or request.task_id,
        config_id=request.id,
        url=request.url,
        token=request.token,
        auth_scheme=auth.scheme,
        auth_credentials=auth.credentials,
    )
    try:
        await check_new(config.url, wait_seconds=settings.HUB_PUSH_TIMEOUT)
    except UnsafeTarget as exc:
        problem = FieldProblem("url", str(exc))
        raise ValidationFailed(f"push notification url refused: {problem}", [problem]) from None
    return config


async def config_create(
    *, caller: Agent, target: Agent | None, request: TaskPushNotificationConfig
) -> TaskPushNotificationConfig:
    """CreateTaskPushNotificationConfig: check the config (a refused one stores nothing),
    then save it for `caller`."""
    config = await config_checked(request)
    row = await db(service.push_config_save, owner=caller, target=target, config=config)
    return _wire(row)


async def config_get(
    *, caller: Agent, target: Agent | None, request: GetTaskPushNotificationConfigRequest
) -> TaskPushNotificationConfig:
    row = await db(
        service.push_config_get,
        owner=caller,
        target=target,
        task_id=request.task_id,
        config_id=request.id,
    )
    return _wire(row)


async def config_list(
    *, caller: Agent, target: Agent | None, request: ListTaskPushNotificationConfigsRequest
) -> ListTaskPushNotificationConfigsResponse:
    rows = await db(service.push_config_list, owner=caller, target=target, task_id=request.task_id)
    return ListTaskPushNotificationConfigsResponse(configs=[_wire(row) for row in rows])


async def config_delete(
    *, caller: Agent, target: Agent | None, request: DeleteTaskPushNotificationConfigRequest
) -> None:
    await db(
        service.push_config_delete,
        owner=caller,
        target=target,
        task_id=request.task_id,
        config_id=request.id,
    )


# --- the sender -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Attempt:
    """How one POST went: `status` is None when no HTTP answer came back."""

    ok: bool
    status: int | None = None
    error: str = ""


def body_of(payload: dict[str, Any]) -> bytes:
    """The exact bytes POSTed (and signed) for an event's StreamResponse payload."""
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()


def _lease() -> timedelta:
    return timedelta(seconds=settings.HUB_PUSH_TIMEOUT * 2 + LEASE_MARGIN_SECONDS)


class Pusher:
    """Claims configs with events due and sends them, each config in its own asyncio task,
    at most CONCURRENCY at once. `run_once` is called by the runtime's loop."""

    def __init__(self) -> None:
        # No keep-alive: each POST connects to the address just checked, and a pooled TLS
        # connection to the same address could carry another host's name.
        self.client = httpx.AsyncClient(
            follow_redirects=False,
            trust_env=False,
            limits=httpx.Limits(max_connections=CONCURRENCY, max_keepalive_connections=0),
        )
        self.sending: set[asyncio.Task[None]] = set()

    async def run_once(self) -> int:
        """Start sending for the configs that are due; how many were claimed."""
        if not settings.HUB_PUSH_ENABLED:
            return 0
        room = CONCURRENCY - len(self.sending)
        if room <= 0:
            return 0
        claims = await db(service.push_claim, limit=room, lease=_lease())
        for pk, claim in claims:
            task = asyncio.get_running_loop().create_task(
                self._send_config(pk, claim), name=f"push-{pk}"
            )
            self.sending.add(task)
            task.add_done_callback(self.sending.discard)
        return len(claims)

    async def close(self) -> None:
        for task in list(self.sending):
            task.cancel()
        await asyncio.gather(*self.sending, return_exceptions=True)
        await self.client.aclose()

    async def _send_config(self, pk: int, claim: str) -> None:
        """Send a claimed config's pending events in order until none are left, a retry has to
        wait, or the claim is lost."""
        try:
            while batch := await db(service.push_pending, pk=pk, claim=claim, limit=BATCH):
                for seq, kind, payload in batch.events:
                    if not await self._send_event(pk, claim, batch, seq, kind, payload):
                        return
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("push delivery failed", extra={"push_config": pk})
            with contextlib.suppress(Exception):  # else the lease runs out
                await db(service.push_release, pk=pk, claim=claim)

    async def _send_event(
        self,
        pk: int,
        claim: str,
        batch: service.PushBatch,
        seq: int,
        kind: str,
        payload: dict[str, Any],
    ) -> bool:
        """POST one event; True to go on with the next one."""
        if kind not in DELIVERED_KINDS:
            return await db(
                service.push_delivered, pk=pk, claim=claim, seq=seq, status=None, lease=_lease()
            )
        attempt = await self.post(batch, payload)
        if attempt.ok:
            return await db(
                service.push_delivered,
                pk=pk,
                claim=claim,
                seq=seq,
                status=attempt.status,
                lease=_lease(),
            )
        failed = await db(
            service.push_failed,
            pk=pk,
            claim=claim,
            seq=seq,
            status=attempt.status,
            error=attempt.error,
            max_attempts=settings.HUB_PUSH_MAX_ATTEMPTS,
            first_retry_seconds=settings.HUB_PUSH_RETRY_SECONDS,
            lease=_lease(),
        )
        if failed.gave_up:
            log.warning(
                "push notification given up",
                extra={
                    "task_id": batch.task_id,
                    "push_config": batch.config_id,
                    "seq": seq,
                    "attempts": failed.attempts,
                    "error": attempt.error,
                },
            )
            return True
        return False

    async def post(self, batch: service.PushBatch, payload: dict[str, Any]) -> Attempt:
        """POST one event to the config's URL: its host is resolved now, every address it
        resolves to checked, and the POST connects to a checked one."""
        timeout = settings.HUB_PUSH_TIMEOUT
        try:
            addresses = await resolve(batch.url, wait_seconds=timeout)
            url = httpx.URL(batch.url)
        except (UnsafeTarget, httpx.InvalidURL) as exc:  # InvalidURL: a config stored before
            return Attempt(ok=False, error=str(exc))  # creation refused what httpx cannot send
        body = body_of(payload)
        headers = {"Host": url.netloc.decode("ascii"), "Content-Type": "application/json"}
        if batch.token:
            headers[TOKEN_HEADER] = batch.token
            headers[HEADER] = sign(body, batch.token)
        if batch.auth_scheme:
            headers["Authorization"] = f"{batch.auth_scheme} {batch.auth_credentials}"
        extensions = {"sni_hostname": url.host} if url.scheme == "https" else {}
        try:
            async with (
                asyncio.timeout(timeout),
                self.client.stream(
                    "POST",
                    url.copy_with(host=addresses[0]),
                    content=body,
                    headers=headers,
                    extensions=extensions,
                    timeout=timeout,
                ) as response,
            ):
                status = response.status_code
        except TimeoutError:
            return Attempt(ok=False, error=f"no answer within {timeout:g}s")
        except httpx.HTTPError as exc:
            return Attempt(ok=False, error=f"{type(exc).__name__}: {exc}".rstrip(": "))
        if 200 <= status < 300:
            return Attempt(ok=True, status=status)
        if 300 <= status < 400:
            return Attempt(
                ok=False, status=status, error=f"HTTP {status}: redirects are not followed"
            )
        return Attempt(ok=False, status=status, error=f"HTTP {status}")
