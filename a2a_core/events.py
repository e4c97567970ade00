"""The hub's event bus: small events on the Channels layer, published after commit.

Groups: `traffic` (one event per commit listing every message and task change in it; a page
about one agent picks that agent's items out of it), `task.<id>` (a wake-up for streams
following that task), `agents` and `agent.<id>` (an agent's registration or status changed),
`escalations`, `policy`, `outbox`, `inbox.<agent id>`.
Each event is one of the models of `a2a_core.schemas.events`; the layer carries it as a dict of
ids and plain fields (`wire`) so the Redis layer can carry it between processes, and whoever
receives one reads it back with `parse_event`.

Services call `publish_on_commit`. Inside a server process the events are handed to one
publisher task on the server's event loop, which sends them in the order they were committed;
elsewhere (the CLI, a test thread) they are sent directly. A group commit's events wait until
its callers have their answers (`held`): turning them into messages and sending them is work
on the loop that would otherwise come first. PostgreSQL + Redis, concurrency 1, two hubs
side by side (`bench/throughput.py --timeline`): the stretch from a commit to its callers
going on 1.02 ms before, 0.25-0.29 ms after, for each of a call's two commits.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.db import transaction

from a2a_core.logging import get_logger
from a2a_core.schemas.events import (
    Event,
    TaskChanged,
    Traffic,
    TrafficItem,
    wire,
)

log = get_logger("events")

# An event as the channel layer carries it.
Wire = dict[str, Any]

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_queue: asyncio.Queue[list[tuple[str, Event]]] | None = None
_publisher: asyncio.Task[None] | None = None
# What a thread publishes while it holds its events back (`held`).
_holding = threading.local()
# In-process listeners (e.g. the dashboard's traffic relay) see every event once per process.
_local_listeners: list[Callable[[str, Wire], None]] = []


async def bind_to_running_loop() -> None:
    """Route this process's events through a publisher task on the current loop (idempotent)."""
    global _loop, _queue, _publisher
    loop = asyncio.get_running_loop()
    with _lock:
        if _loop is loop and _publisher is not None and not _publisher.done():
            return
        _loop = loop
        _queue = asyncio.Queue()
        _publisher = loop.create_task(_publish_forever(_queue), name="hub-event-publisher")


async def unbind() -> None:
    global _loop, _queue, _publisher
    with _lock:
        task, _loop, _queue, _publisher = _publisher, None, None, None
    if task is not None:
        task.cancel()


async def _publish_forever(queue: asyncio.Queue[list[tuple[str, Event]]]) -> None:
    layer = get_channel_layer()
    # The in-memory layer's groups are all in this process: one nobody joined has nobody to
    # tell (every call wakes a `task.<id>` group, mostly unwatched).
    in_memory = isinstance(layer, InMemoryChannelLayer)
    while True:
        batch = await queue.get()
        sends: list[tuple[str, Wire]] = []
        for group, event in batch:
            unheard = layer is None or (in_memory and not layer.groups.get(group))
            if unheard and not _local_listeners:
                continue  # not even turned into a dict
            payload = wire(event)
            _notify_local(group, payload)
            if not unheard:
                sends.append((group, payload))
        if sends:
            try:
                await _group_send_all(layer, sends)
            except Exception:  # the bus is best effort: the database is the source of truth
                log.exception("could not publish events", extra={"groups": len(sends)})


async def _group_send_all(layer: Any, sends: list[tuple[str, Wire]]) -> None:
    """Send a commit's events, in order. On Redis pub/sub, one command per shard: a script that
    publishes each of them (`_PUBLISH_ALL`); other layers: one `group_send` each.

    One PUBLISH per event cost the loop ~1 ms a call (a call's two commits publish several);
    one pipelined round trip per commit still packed each command and read each reply in
    Python. The CPU of sending one commit's events from the loop (`bench/README.md`, "A
    commit's events in one command"): 0.146-0.179 ms as a pipeline of four (the traffic, its
    copies for the two agents involved, the task's wake-up), 0.124-0.131 ms as one script
    call, 0.108-0.118 ms without the agents' copies, which nobody listened to (a page about
    one agent picks its items out of `traffic`)."""
    shards = _pubsub_shards(layer, [group for group, _ in sends])
    if shards is None:
        for group, payload in sends:
            await layer.group_send(group, payload)
        return
    by_shard: dict[Any, list[str | bytes]] = {}
    for (_, payload), (shard, channel) in zip(sends, shards, strict=True):
        by_shard.setdefault(shard, []).extend((channel, layer.serialize(payload)))
    for shard, args in by_shard.items():
        async with shard._lock:
            shard._ensure_redis()
            await _publish_all(shard._redis)(args=args)


# Publishes its arguments, taken in pairs: a channel, then the message for it.
_PUBLISH_ALL = """
for i = 1, #ARGV, 2 do
    redis.call('PUBLISH', ARGV[i], ARGV[i + 1])
end
return #ARGV / 2
"""
_scripts: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def _publish_all(client: Any) -> Any:
    """`_PUBLISH_ALL` on `client` (a shard's Redis client: the layer makes a new one after a
    lost connection). The script travels once per server; then only its digest (EVALSHA)."""
    script = _scripts.get(client)
    if script is None:
        script = _scripts[client] = client.register_script(_PUBLISH_ALL)
    return script


def _pubsub_shards(layer: Any, groups: list[str]) -> list[tuple[Any, str]] | None:
    """(shard, Redis channel) per group on channels_redis' pub/sub layer, or None when the
    layer is another (or a version whose insides differ: then events go one by one)."""
    try:
        from channels_redis.pubsub import RedisPubSubChannelLayer

        if not isinstance(layer, RedisPubSubChannelLayer):
            return None
        loop_layer = layer._get_layer()
        found = []
        for group in groups:
            channel = loop_layer._get_group_channel_name(group)
            found.append((loop_layer._get_shard(channel), channel))
        if not all(
            hasattr(shard, "_lock") and hasattr(shard, "_ensure_redis") and hasattr(shard, "_redis")
            for shard, _ in found
        ):
            return None
        return found
    except (ImportError, AttributeError):
        return None


def _notify_local(group: str, payload: Wire) -> None:
    for listener in list(_local_listeners):
        try:
            listener(group, payload)
        except Exception:
            log.exception("event listener failed")


def add_local_listener(listener: Callable[[str, Wire], None]) -> None:
    _local_listeners.append(listener)


def remove_local_listener(listener: Callable[[str, Wire], None]) -> None:
    if listener in _local_listeners:
        _local_listeners.remove(listener)


@contextlib.contextmanager
def held() -> Iterator[list[list[tuple[str, Event]]]]:
    """Keep back what this thread publishes meanwhile, in order, for `publish_held`."""
    kept: list[list[tuple[str, Event]]] = []
    _holding.kept = kept
    try:
        yield kept
    finally:
        _holding.kept = None


def publish_held(kept: list[list[tuple[str, Event]]]) -> None:
    """Send what `held` kept back, in order, ahead of anything published after this call."""
    for events in kept:
        publish_many(events)


def publish_many(events: list[tuple[str, Event]]) -> None:
    """Send events now, in order. Safe from any thread; events from one thread keep their order."""
    kept = getattr(_holding, "kept", None)
    if kept is not None:
        kept.append(events)
        return
    loop, queue = _loop, _queue
    if loop is not None and queue is not None and not loop.is_closed():
        loop.call_soon_threadsafe(queue.put_nowait, events)
        return
    items = [(group, wire(payload)) for group, payload in events]
    for group, payload in items:
        _notify_local(group, payload)
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None

    async def send() -> None:
        for group, payload in items:
            await layer.group_send(group, payload)

    if running is not None:
        running.create_task(send())
    else:
        try:
            async_to_sync(send)()
        except Exception:
            log.exception("could not publish events")


def publish(group: str, payload: Event) -> None:
    publish_many([(group, payload)])


def publish_on_commit(group: str, payload: Event) -> None:
    """Publish after the current transaction commits (at once when there is none)."""
    publish_many_on_commit([(group, payload)])


def publish_many_on_commit(items: list[tuple[str, Event]]) -> None:
    transaction.on_commit(lambda: publish_many(items), robust=True)


def publish_traffic_on_commit(items: list[TrafficItem], tasks: dict[str, int]) -> None:
    """After commit: one `traffic` event carrying `items`, and a wake-up on `task.<id>` for
    each changed task with its latest event sequence number."""
    if not items and not tasks:
        return
    batch: list[tuple[str, Event]] = []
    if items:
        batch.append(("traffic", Traffic(items=items)))
    batch.extend(
        (f"task.{task_id}", TaskChanged(task_id=task_id, seq=seq)) for task_id, seq in tasks.items()
    )
    publish_many_on_commit(batch)
