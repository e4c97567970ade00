"""Running a replay set: each recorded input sent again through the hub's own A2A endpoint,
with the a2a-sdk client and the replay caller's token, as any caller's call.

Nothing goes around the hub: the policy judges each replay (a refusal is the item's outcome,
with the hub's reason), the hub records it as a new task, and the agent gets it like any
call, with `metadata.a2aHub.replay` saying what it replays. The original tasks are not
touched (a replay starts a task and a context of its own), and the replays count in the
replay caller's rate windows, not in those of the agents that first called. Items are sent
`CONCURRENCY` at a time; `progress` is told after each.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import Message, SendMessageRequest
from a2a.utils.errors import A2AError
from google.protobuf.json_format import ParseDict

from a2a_core.asyncdb import db
from a2a_core.models import Direction, ReplayItem, ReplaySet
from a2a_core.models import Message as MessageRow
from a2a_core.schemas.a2a import HUB_METADATA
from a2a_core.services.replay import (
    replay_caller_token,
    replay_item_record,
    replay_run_begin,
    replay_run_end,
)

CONCURRENCY = 4
# How long one replay may take, at most (the hub's own timeout applies first).
CALL_SECONDS = 120.0

Progress = Callable[[ReplayItem, int, int], None]


async def replay_run(
    set_id: int,
    *,
    hub_url: str,
    token: str = "",
    progress: Progress | None = None,
    begun: bool = False,
) -> ReplaySet:
    """Run set `set_id` through the hub at `hub_url` as its caller (`token`: the caller's;
    by default the hub-owned caller's own), and return it as it ended. `begun`: the run was
    begun already (`replay_run_begin`, by whoever started it in the background)."""
    if not begun:
        await db(replay_run_begin, set_id=set_id)
    try:
        caller = await db(lambda: ReplaySet.objects.select_related("caller").get(pk=set_id).caller)
        token = token or await db(replay_caller_token, caller)
        items = await db(
            lambda: list(ReplayItem.objects.filter(replay_set_id=set_id).order_by("position"))
        )
        target = await db(lambda: ReplaySet.objects.select_related("target").get(pk=set_id).target)
        done = 0
        gate = asyncio.Semaphore(CONCURRENCY)
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(headers=headers, timeout=CALL_SECONDS) as http:
            clients: dict[str, Any] = {}

            async def one(item: ReplayItem) -> None:
                nonlocal done
                async with gate:
                    slug = target.slug if target is not None else item.original_target
                    recorded = await _replay_one(http, clients, hub_url, slug, item, set_id)
                done += 1
                if progress is not None:
                    progress(recorded, done, len(items))

            await asyncio.gather(*(one(item) for item in items))
    finally:
        await db(replay_run_end, set_id=set_id)
    return await db(ReplaySet.objects.get, pk=set_id)


async def _replay_one(
    http: httpx.AsyncClient,
    clients: dict[str, Any],
    hub_url: str,
    slug: str,
    item: ReplayItem,
    set_id: int,
) -> ReplayItem:
    message_id = f"replay-{set_id}-{item.position}-{uuid.uuid4().hex[:12]}"
    marker = {"replay": {"set": set_id, "of": item.original_id, "position": item.position}}
    wire = item.input if isinstance(item.input, dict) else {}
    message: dict[str, Any] = {
        "messageId": message_id,
        "role": "ROLE_USER",
        "parts": wire.get("parts") or [],
        "metadata": {**(wire.get("metadata") or {}), HUB_METADATA: marker},
    }
    if wire.get("extensions"):
        message["extensions"] = wire["extensions"]
    request = SendMessageRequest(message=ParseDict(message, Message()))
    request.metadata.update({**(wire.get("requestMetadata") or {}), HUB_METADATA: marker})
    try:
        if slug not in clients:
            factory = ClientFactory(ClientConfig(streaming=False, httpx_client=http))
            clients[slug] = await factory.create_from_url(f"{hub_url.rstrip('/')}/a2a/{slug}")
        async for _ in clients[slug].send_message(request):
            break
    except A2AError as exc:
        return await _refused_or_failed(item, message_id, str(exc) or type(exc).__name__)
    except (httpx.HTTPError, OSError, ValueError) as exc:
        return await _refused_or_failed(item, message_id, f"{type(exc).__name__}: {exc}")
    found = await db(_task_of, message_id)
    if found is None:
        return await _refused_or_failed(item, message_id, "the hub recorded no task for it")
    task_id, decision = found
    # A replay the policy holds waits for a human like any call: it says so.
    outcome = "held" if decision == "hold" else "done"
    return await db(replay_item_record, item_id=item.pk, outcome=outcome, replay_task_id=task_id)


def _task_of(message_id: str) -> tuple[str, str] | None:
    """The task the hub recorded the replay in, and its decision on it."""
    return (
        MessageRow.objects.filter(message_id=message_id, direction=Direction.REQUEST)
        .exclude(task__isnull=True)
        .values_list("task_id", "decision")
        .first()
    )


async def _refused_or_failed(item: ReplayItem, message_id: str, error: str) -> ReplayItem:
    """A replay the hub refused (its policy's reason, as recorded) or that failed."""
    refusal = await db(
        lambda: (
            MessageRow.objects.filter(
                message_id=message_id, direction=Direction.REQUEST, decision="reject"
            )
            .values_list("decision_reason", "decision_detail")
            .first()
        )
    )
    if refusal is not None:
        reason, detail = refusal
        return await db(
            replay_item_record, item_id=item.pk, outcome="refused", reason=f"{reason}: {detail}"
        )
    # The agent failed it (the hub recorded its task as failed): an answer all the same.
    found = await db(_task_of, message_id)
    return await db(
        replay_item_record,
        item_id=item.pk,
        outcome="done" if found else "failed",
        reason=error,
        replay_task_id=found[0] if found else None,
    )
