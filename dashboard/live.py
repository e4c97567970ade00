"""The dashboard's live updates: one relay per server process, any number of browsers.

The relay listens once per process to the hub's event groups. Events are coalesced only under
load: a flush goes out once the previous one has been written to every browser's socket and
as long again has passed (at most FLUSH_SECONDS after that one began), with everything that
arrived meanwhile. An idle relay sends an event at once; a busy one sends fewer, larger
frames — however busy the hub is, a browser gets at most one frame per flush. Each flush is rendered once, on a
thread of the relay's own (`render_update`), mostly from what the events carry: a feed row is
drawn from its `traffic` item without reading the message back, as the same `FeedRow` a page's
first render draws from the database. Every browser then takes from
the flush the fragments its page shows and its filters let through (`Viewer.frame`). A frame
is plain htmx out-of-band HTML.

Pages that show numbers (the overview) are refreshed by the relay's ticker every
TICK_SECONDS while someone looks at them, also rendered once per tick — on a thread of their
own, so that aggregating a busy hour never holds up the hub's database thread, and less often
when that takes long (see `Relay._tick`).

The relay listens only while someone looks: IDLE_SECONDS after the last browser leaves, it
leaves the event groups (a busy hub's every event would otherwise be received and decoded
for nobody), and the next browser to open a page starts it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from channels.layers import get_channel_layer
from django.db import close_old_connections, connection, connections
from django.template.loader import render_to_string

from a2a_core.logging import get_logger
from a2a_core.models import Agent
from a2a_core.schemas.events import (
    AgentChanged,
    AnsweredItem,
    EscalationChanged,
    MessageItem,
    PolicyActivated,
    Traffic,
    parse_event,
)
from a2a_core.selectors.escalations import escalation_counts
from a2a_core.selectors.traffic import FeedRow, TrafficFilter, feed_rows_by_pk, with_deciders

log = get_logger("dashboard.live")

# The longest a flush waits for the browsers to take the one before it.
FLUSH_SECONDS = 0.05
TICK_SECONDS = 2.0
# How many browsers a flush writes to before letting the hub's calls have the loop.
OFFERS_PER_TURN = 50
# Computing the numbers may take at most this share of the time between two ticks.
TICK_BUDGET = 0.1
# How long the relay goes on listening after its last browser left: a reload or a click to
# another page comes back within it and finds the relay still subscribed.
IDLE_SECONDS = 30.0
GROUPS = ("traffic", "escalations", "agents", "policy")


@dataclass(frozen=True)
class Row:
    """One feed row (a message), rendered, and the typed row it was drawn from."""

    html: str
    feed: FeedRow

    @property
    def message_pk(self) -> int:
        return self.feed.pk

    @property
    def task_id(self) -> str:
        return self.feed.task_id

    @property
    def agent_ids(self) -> frozenset[int]:
        return frozenset(pk for pk in (self.feed.sender_id, self.feed.target_id) if pk)

    def passes(self, filters: TrafficFilter, agent_id: int | None) -> bool:
        row = self.feed
        return filters.matches(
            kind=row.kind,
            decision=row.decision,
            agent_ids=self.agent_ids,
            agent_id=agent_id,
            sender=row.sender,
            target=row.target,
            state=row.task_state,
            summary=row.summary,
            created_at=row.created_at,
        )


@dataclass
class Update:
    """What changed since the last flush, rendered."""

    rows: list[Row] = field(default_factory=list)
    # The header's count of pending escalations, when escalations changed.
    badge: str | None = None
    escalations: set[int] = field(default_factory=set)
    # Escalations decided (or withdrawn, expired) since: every open inbox drops them at once.
    escalations_closed: set[int] = field(default_factory=set)
    # agent id -> its status badge
    agents: dict[int, str] = field(default_factory=dict)
    tasks: set[str] = field(default_factory=set)
    # The delegation chains (root task ids) the changed tasks belong to.
    chains: set[str] = field(default_factory=set)
    # task id -> the feed badge showing its new state, updated in place: a task's status
    # changes show in the rows of its messages, not as rows of their own.
    task_states: dict[str, str] = field(default_factory=dict)
    # message pk -> the latency of a request answered since its row was drawn
    latencies: dict[int, str] = field(default_factory=dict)
    # message pk -> the decision of a held message a human decided on, for a row already
    # drawn: updated in place (the row stays where it is, as a reload shows it)
    decisions: dict[int, str] = field(default_factory=dict)
    policy: str | None = None
    # page -> html: what the ticker renders for pages that show numbers
    ticks: dict[str, str] = field(default_factory=dict)
    # (filters, the filters' agent) -> the rows that pass them: worked out once per flush for
    # all the pages that show the same filters.
    _passing: dict[tuple[TrafficFilter, int | None], list[Row]] = field(
        default_factory=dict, repr=False
    )

    def rows_passing(self, filters: TrafficFilter, agent_id: int | None) -> list[Row]:
        """The rows that pass `filters` (`agent_id`: the id of the filters' agent)."""
        key = (filters, agent_id)
        found = self._passing.get(key)
        if found is None:
            found = self._passing[key] = [row for row in self.rows if row.passes(*key)]
        return found


class Viewer(Protocol):
    page: str

    def offer(self, update: Update) -> None:
        """Send the browser what of `update` its page shows (written at once, unless the
        browser has not taken what it was sent before)."""

    def pending(self) -> asyncio.Future[None] | None:
        """What finishes once everything offered so far has been written to the browser's
        socket; None if it has been already."""


# --- rendering (the relay's thread) ----------------------------------------------------------


def feed_row(row: FeedRow) -> Row:
    return Row(html=render_to_string("dashboard/traffic.html#row", {"m": row}), feed=row)


# Agent id -> slug. A slug never changes and an agent with traffic is never deleted, so this
# only grows, by the agents that have traffic.
_slugs: dict[int, str] = {}


def _learn_slugs(items: Iterable[MessageItem]) -> None:
    """Read the slugs of the agents these items name, the first time only."""
    ids = {
        pk
        for item in items
        if item.row is not None
        for pk in (item.sender_id, item.target_id, item.row.redirected_to_id)
        if pk is not None
    }
    if missing := ids - _slugs.keys():
        _slugs.update(Agent.objects.filter(pk__in=missing).values_list("pk", "slug"))


def _feed_rows(items: list[MessageItem]) -> list[FeedRow]:
    """The rows `items` show, in order: drawn from what each item carries, read from the
    database only for an item that carries too little."""
    _learn_slugs(items)
    drawn = {item.message_pk: FeedRow.of_item(item, _slugs) for item in items}
    unread = [pk for pk, row in drawn.items() if row is None]
    if unread:
        drawn.update(feed_rows_by_pk(unread))
    return with_deciders([row for row in drawn.values() if row is not None])


def render_update(messages: Iterable[dict[str, Any]]) -> Update:
    """Render what a batch of channel-layer messages changed (sync: on the relay's thread)."""
    update = Update()
    # A message published twice (a retried commit, a reply recorded with its task's
    # status) is one row, drawn from its latest item.
    message_items: dict[int, MessageItem] = {}
    decided: set[int] = set()
    states: dict[str, str] = {}
    latencies: dict[int, int] = {}
    agent_ids: set[int] = set()
    for event in filter(None, map(parse_event, messages)):
        if isinstance(event, Traffic):
            for item in event.items:
                if isinstance(item, MessageItem):
                    message_items[item.message_pk] = item
                    if item.decided:
                        decided.add(item.message_pk)
                elif isinstance(item, AnsweredItem):
                    latencies[item.message_pk] = item.latency_ms
                else:
                    update.tasks.add(item.task_id)
                    update.chains.add(item.root_id or item.task_id)
                    states[item.task_id] = item.state
        elif isinstance(event, EscalationChanged):
            update.escalations.add(event.escalation_id)
            if event.status != "pending":
                update.escalations_closed.add(event.escalation_id)
        elif isinstance(event, AgentChanged):
            agent_ids.add(event.agent_id)
        elif isinstance(event, PolicyActivated):
            update.policy = render_to_string(
                "dashboard/base_fragments.html#policy-banner", {"number": event.number}
            )
    if message_items:
        drawn = _feed_rows(list(message_items.values()))
        update.rows.extend(feed_row(row) for row in reversed(drawn))
        update.decisions = {
            row.pk: render_to_string("dashboard/traffic.html#decision", {"m": row, "oob": True})
            for row in drawn
            if row.pk in decided
        }
    update.task_states = {
        pk: render_to_string(
            "dashboard/base_fragments.html#task-state",
            {"task": {"pk": pk, "state": state}, "oob": True},
        )
        for pk, state in states.items()
    }
    update.latencies = {
        pk: render_to_string(
            "dashboard/traffic.html#latency", {"m": {"pk": pk, "latency_ms": ms}, "oob": True}
        )
        for pk, ms in latencies.items()
    }
    if update.escalations:
        pending, expiring = escalation_counts()
        update.badge = render_to_string(
            "dashboard/base_fragments.html#escalation-badge",
            {"pending": pending, "expiring": expiring, "oob": True},
        )
    for agent in Agent.objects.filter(pk__in=agent_ids) if agent_ids else ():
        update.agents[agent.pk] = render_to_string(
            "dashboard/base_fragments.html#agent-status", {"agent": agent, "oob": True}
        )
    return update


# --- the relay ---------------------------------------------------------------------------------


Ticker = Callable[[], str]
_tickers: dict[str, Ticker] = {}
# The relay only reads, so it keeps off the hub's database thread — where it would wait
# behind the writes of a busy hub — and reads on connections of its own: one thread renders
# the flushes, another the tickers (aggregating a busy hour must not hold up the feed).
_render_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dashboard-render")
_tick_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dashboard-ticks")


def _read[R](fn: Callable[[], R]) -> R:
    close_old_connections()
    try:
        return fn()
    finally:
        # With PostgreSQL the connection goes back to the pool between reads; a SQLite
        # connection is kept (opening one costs more than most reads).
        if connection.vendor != "sqlite":
            connections.close_all()


class Relay:
    def __init__(self) -> None:
        self.viewers: set[Viewer] = set()
        self.pending: list[dict[str, Any]] = []
        self.kick = asyncio.Event()
        self.tasks: list[asyncio.Task[None]] = []
        # The timer that stops the relay once nobody looks (see `leave`).
        self.resting: asyncio.TimerHandle | None = None
        # page -> a sync function rendering that page's numbers (see `ticker`)
        self.tickers = _tickers

    def join(self, viewer: Viewer) -> None:
        self.viewers.add(viewer)
        if self.resting is not None:
            self.resting.cancel()
            self.resting = None
        if not self.tasks:
            loop = asyncio.get_running_loop()
            self.tasks = [
                loop.create_task(self._listen(), name="dashboard-listen"),
                loop.create_task(self._flush(), name="dashboard-flush"),
                loop.create_task(self._tick(), name="dashboard-tick"),
            ]

    def leave(self, viewer: Viewer) -> None:
        self.viewers.discard(viewer)
        if not self.viewers and self.tasks and self.resting is None:
            self.resting = asyncio.get_running_loop().call_later(IDLE_SECONDS, self._rest)

    def _rest(self) -> None:
        """Nobody has looked for IDLE_SECONDS: stop listening until the next browser joins."""
        self.resting = None
        if self.viewers:
            return
        for task in self.tasks:
            task.cancel()
            # Held until it has left the groups (its `finally`).
            _stopping.add(task)
            task.add_done_callback(_stopping.discard)
        self.tasks = []
        self.pending = []

    async def _listen(self) -> None:
        layer = get_channel_layer()
        if layer is None:
            return
        channel = await layer.new_channel()
        try:
            for group in GROUPS:
                await layer.group_add(group, channel)
            while True:
                message = await layer.receive(channel)
                # Read on the relay's thread (`render_update`), off the event loop.
                self.pending.append(message)
                self.kick.set()
        finally:
            for group in GROUPS:
                with contextlib.suppress(Exception):
                    await layer.group_discard(group, channel)

    async def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self.kick.wait()
            self.kick.clear()
            events, self.pending = self.pending, []
            if not events or not self.viewers:
                continue
            began = loop.time()
            try:
                update = await loop.run_in_executor(
                    _render_thread, _read, functools.partial(render_update, events)
                )
            except Exception:
                log.exception("rendering live updates failed")
                continue
            viewers = list(self.viewers)
            for count, viewer in enumerate(viewers, 1):
                viewer.offer(update)
                if count % OFFERS_PER_TURN == 0:
                    await asyncio.sleep(0)  # the hub's calls between, with many browsers
            # What arrives until the browsers have this flush goes out with the next one; a
            # browser that does not keep up holds the others back FLUSH_SECONDS at most.
            pending = [p for viewer in viewers if (p := viewer.pending()) is not None]
            if pending:
                await asyncio.wait(pending, timeout=max(0.0, began + FLUSH_SECONDS - loop.time()))
            # Then as long again, so that flushing takes half the loop at most: the hub's
            # calls share it.
            took = loop.time() - began
            await asyncio.sleep(min(took, began + FLUSH_SECONDS - loop.time()))

    async def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(TICK_SECONDS)
            pages = {viewer.page for viewer in self.viewers} & set(self.tickers)
            if not pages:
                continue
            began = loop.time()
            try:
                ticks = await loop.run_in_executor(
                    _tick_thread, _read, functools.partial(self._render_ticks, pages)
                )
            except Exception:
                log.exception("rendering live numbers failed")
                continue
            update = Update(ticks=ticks)
            for viewer in list(self.viewers):
                viewer.offer(update)
            # A very busy hour takes long to aggregate: then tick less often, within budget.
            took = loop.time() - began
            await asyncio.sleep(max(0.0, took / TICK_BUDGET - took - TICK_SECONDS))

    def _render_ticks(self, pages: set[str]) -> dict[str, str]:
        return {page: self.tickers[page]() for page in pages}


_relays: dict[asyncio.AbstractEventLoop, Relay] = {}
_stopping: set[asyncio.Task[None]] = set()


def relay() -> Relay:
    """This process's relay (one per event loop)."""
    loop = asyncio.get_running_loop()
    found = _relays.get(loop)
    if found is None:
        for old in [lp for lp in _relays if lp.is_closed()]:
            del _relays[old]
        found = _relays[loop] = Relay()
    return found


def ticker(page: str) -> Callable[[Ticker], Ticker]:
    """Register the sync function that renders `page`'s live numbers every TICK_SECONDS."""

    def register(render: Ticker) -> Ticker:
        _tickers[page] = render
        return render

    return register


async def stop() -> None:
    """Stop this loop's relay (tests, shutdown)."""
    found = _relays.pop(asyncio.get_running_loop(), None)
    if found is None:
        return
    if found.resting is not None:
        found.resting.cancel()
    for task in found.tasks:
        task.cancel()
    for task in found.tasks:
        with contextlib.suppress(asyncio.CancelledError):
            await task
