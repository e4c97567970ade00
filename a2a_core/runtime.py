"""What every server process runs besides answering requests.

- the bus listener: events from other processes (a new policy, a changed agent, a queued
  delivery) reach this process's caches, outbox and inbox sessions at once;
- the outbox: delivers queued messages (approved or redirected by a human) and fan-out
  copies for endpoint agents;
- the sweeper: applies escalation and inbox task deadlines, hands over tasks a dead process
  was delivering (to be asked about), drops inbox sessions of dead connections, ends this
  process's inbox sessions of agents that lost access (`a2a_core.inbox.access`) and clears old
  rate-limit windows;
- the follower: takes over endpoint agents' unfinished tasks no live process follows (see
  `a2a_core.delivery.follow`);
- the pusher: POSTs tasks' events to their push notification webhooks;
- the notifier: tells people when an escalation arrives, nears its deadline or expires, at
  most one message per target per digest interval (see `a2a_core.delivery.notify`); the
  sweeper passes items nobody answered on to the next target (`notify_pass_on`);
- the sealer: seals the tamper-evident record's new entries every HUB_LEDGER_SEAL_SECONDS
  and signs a checkpoint every HUB_LEDGER_CHECKPOINT_SECONDS when it grew
  (`a2a_core.services.ledger`);
- beside them, on threads of their own: SQLite's checkpoints (`a2a_core.storage.sqlite`),
  PostgreSQL's vacuums of the tables every call updates (`a2a_core.storage.postgresql`).
Each loop survives its own errors (and logs them as warnings); the database stays the source of truth, so a missed event
only delays things until the next poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from channels.layers import get_channel_layer

from a2a_core import agent_cache
from a2a_core.asyncdb import db
from a2a_core.logging import get_logger
from a2a_core.schemas.events import (
    AgentChanged,
    FanOutQueued,
    NotifyQueued,
    OutboxQueued,
    PolicyActivated,
    parse_event,
)

if TYPE_CHECKING:
    from a2a_core.storage.postgresql.vacuum import Vacuumer
    from a2a_core.storage.sqlite.base import Checkpointer

log = get_logger("runtime")

OUTBOX_POLL_SECONDS = 2.0
PUSH_POLL_SECONDS = 0.5
FOLLOW_POLL_SECONDS = 1.0
SWEEP_SECONDS = 1.0
GROUPS = ("policy", "agents", "outbox")
# Agent events after which the agent's inbox sessions may have to end (and agent.status
# when it says suspended).
ACCESS_EVENTS = ("agent.token_rotated", "agent.updated", "agent.deleted")

_tasks: list[asyncio.Task[None]] = []
_outbox_wake: asyncio.Event | None = None
_notify_wake: asyncio.Event | None = None
_checkpointer: Checkpointer | None = None
_vacuumer: Vacuumer | None = None


async def _bus() -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    channel = await layer.new_channel()
    for group in GROUPS:
        await layer.group_add(group, channel)
    try:
        while True:
            event = parse_event(await layer.receive(channel))
            if isinstance(event, PolicyActivated):
                from a2a_core.services.policy import invalidate

                invalidate()
            elif isinstance(event, AgentChanged):
                agent_cache.forget(agent_id=event.agent_id, slug=event.slug)
                suspended = event.event == "agent.status" and event.status == "suspended"
                if event.event in ACCESS_EVENTS or suspended:
                    _spawn(_end_revoked_sessions([event.agent_id]))
            elif isinstance(event, OutboxQueued | FanOutQueued) and _outbox_wake is not None:
                _outbox_wake.set()
            elif isinstance(event, NotifyQueued) and _notify_wake is not None:
                _notify_wake.set()
    finally:
        for group in GROUPS:
            with contextlib.suppress(Exception):
                await layer.group_discard(group, channel)


async def _outbox() -> None:
    from a2a_core.delivery.fanout import fanout_run_once
    from a2a_core.delivery.outbox import outbox_run_once

    assert _outbox_wake is not None
    while True:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(OUTBOX_POLL_SECONDS):
                await _outbox_wake.wait()
        _outbox_wake.clear()
        try:
            while await outbox_run_once():
                pass
        except Exception:
            log.warning("outbox pass failed", exc_info=True)
        try:
            while await fanout_run_once():
                pass
        except Exception:
            log.warning("fan-out pass failed", exc_info=True)


def _sweep(now: float, last_cleanup: float) -> float:
    from a2a_core.models import PolicyCounter
    from a2a_core.services.escalation_expiry import escalations_expire
    from a2a_core.services.follow import tasks_abandoned_follow
    from a2a_core.services.inbox import inbox_sessions_expire, inbox_tasks_expire
    from a2a_core.services.notify import notify_due_soon, notify_keys_sweep, notify_pass_on

    escalations_expire()
    notify_due_soon()
    notify_pass_on()
    inbox_tasks_expire()
    inbox_sessions_expire()
    tasks_abandoned_follow()
    if now - last_cleanup > 600:
        PolicyCounter.objects.filter(window__lt=int(now) - 7200).delete()
        notify_keys_sweep()
        return now
    return last_cleanup


async def _sweeper() -> None:
    last_cleanup = 0.0
    while True:
        await asyncio.sleep(SWEEP_SECONDS)
        try:
            last_cleanup = await db(_sweep, time.time(), last_cleanup)
        except Exception:
            log.warning("sweep failed", exc_info=True)
        await _end_revoked_sessions(None)


async def _end_revoked_sessions(agent_ids: list[int] | None) -> None:
    from a2a_core.inbox.access import sessions_check

    try:
        await sessions_check(agent_ids=agent_ids)
    except Exception:
        log.warning("inbox session check failed", exc_info=True)


_checks: set[asyncio.Task[None]] = set()


def _spawn(coroutine: Coroutine[Any, Any, None]) -> None:
    """Run `coroutine` beside the bus listener, which must not wait for the database."""
    task = asyncio.get_running_loop().create_task(coroutine)
    _checks.add(task)
    task.add_done_callback(_checks.discard)


async def _follower() -> None:
    from a2a_core.delivery.follow import follow_due, stop_followers

    try:
        while True:
            try:
                await follow_due()
            except Exception:
                log.warning("follow pass failed", exc_info=True)
            await asyncio.sleep(FOLLOW_POLL_SECONDS)
    finally:
        await stop_followers()


async def _pusher() -> None:
    from a2a_core.delivery.push import Pusher

    pusher = Pusher()
    try:
        while True:
            await asyncio.sleep(PUSH_POLL_SECONDS)
            try:
                await pusher.run_once()
            except Exception:
                log.warning("push pass failed", exc_info=True)
    finally:
        await pusher.close()


async def _notifier() -> None:
    """People told about escalations (webhooks, email): woken when one is queued, and once
    a second for retries."""
    from a2a_core.delivery.notify import Notifier

    assert _notify_wake is not None
    notifier = Notifier()
    try:
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    await _notify_wake.wait()
            _notify_wake.clear()
            try:
                while await notifier.run_once():
                    pass
            except Exception:
                log.debug("notify pass failed", exc_info=True)
    finally:
        await notifier.close()


async def _sealer() -> None:
    """The record's sealing and checkpoints (`a2a_core.services.ledger`), off the calls'
    wait. Every process seals; the head row's lock makes them one log."""
    from django.conf import settings

    from a2a_core.services.ledger import ledger_seal
    from a2a_core.storage.writers import writer

    every = max(0.05, float(settings.HUB_LEDGER_SEAL_SECONDS))
    checkpoint_every = max(every, float(settings.HUB_LEDGER_CHECKPOINT_SECONDS))
    last_checkpoint = time.monotonic()
    while True:
        await asyncio.sleep(every)
        due = time.monotonic() - last_checkpoint >= checkpoint_every
        try:
            # On the group commits' own writer: between two batches, never waiting on
            # SQLite's write lock beside them.
            await writer().run(functools.partial(ledger_seal, checkpoint=due))
        except Exception:
            log.warning("sealing the record failed", exc_info=True)
        else:
            if due:
                last_checkpoint = time.monotonic()


def _checkpoint_aside() -> None:
    """SQLite: this process's checkpoints on a thread of their own (see a2a_core/sqlite)."""
    global _checkpointer
    from django.db import connections

    from a2a_core.storage.sqlite.base import Checkpointer, DatabaseWrapper

    if _checkpointer is not None:
        return
    database = connections["default"]
    if isinstance(database, DatabaseWrapper) and not database.is_in_memory_db():
        _checkpointer = Checkpointer(database.settings_dict["NAME"]).start()
        # The database thread's connection was made before: the next one skips checkpoints.
        database.close()


def _vacuum_aside() -> None:
    """PostgreSQL: this process's vacuums of the hot tables, on a thread of their own (see
    a2a_core/storage/postgresql/vacuum.py)."""
    global _vacuumer
    from django.conf import settings
    from django.db import connections

    from a2a_core.storage.postgresql.vacuum import Vacuumer

    every = settings.HUB_PG_VACUUM_SECONDS
    if _vacuumer is None and every > 0 and connections["default"].vendor == "postgresql":
        _vacuumer = Vacuumer(every).start()


async def start() -> None:
    global _outbox_wake, _notify_wake
    if _tasks:
        return
    await db(_checkpoint_aside)
    _vacuum_aside()
    _outbox_wake = asyncio.Event()
    _notify_wake = asyncio.Event()
    loop = asyncio.get_running_loop()
    from django.conf import settings

    if settings.HUB_LEDGER:
        _tasks.append(loop.create_task(_sealer(), name="hub-sealer"))
    for name, coroutine in (
        ("bus", _bus()),
        ("outbox", _outbox()),
        ("sweeper", _sweeper()),
        ("pusher", _pusher()),
        ("follower", _follower()),
        ("notifier", _notifier()),
    ):
        _tasks.append(loop.create_task(coroutine, name=f"hub-{name}"))


async def stop() -> None:
    global _outbox_wake, _notify_wake, _checkpointer, _vacuumer
    for task in _tasks:
        task.cancel()
    await asyncio.gather(*_tasks, return_exceptions=True)
    _tasks.clear()
    _outbox_wake = None
    _notify_wake = None
    if _checkpointer is not None:
        await asyncio.to_thread(_checkpointer.stop)
        _checkpointer = None
    if _vacuumer is not None:
        await asyncio.to_thread(_vacuumer.stop)
        _vacuumer = None
