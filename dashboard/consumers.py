"""The dashboard's websocket: `/ws/dashboard/?page=<page>[&task=<id>][&agent=..&kind=..]`.

One per open page. It joins the process's relay (`dashboard.live`) and sends the browser one
frame per flush with what its page shows — feed rows its filters let through, the header's
escalation badge, status badges, refresh triggers — as htmx out-of-band HTML. Frames a slow
browser has not taken yet are merged into one; past MAX_BACKLOG the browser is told to reload
instead of being sent more. The browser changes its filters (or pauses the feed) by sending
its filter form over the socket (htmx `ws-send`); it then gets the matching rows afresh.

Only logged-in users with a role connect (the handshake is refused otherwise), and only from
this site's own pages (see `dashboard.routing`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import OrderedDict, deque
from typing import Any
from urllib.parse import parse_qs

from django.template.loader import render_to_string

from a2a_core.asyncdb import db
from a2a_core.models import Agent
from a2a_core.schemas.a2a import holds_lone_surrogate, holds_nul
from a2a_core.selectors.traffic import FeedRow, TrafficFilter, traffic_recent
from a2a_core.sockets import Consumer
from dashboard import live
from dashboard.roles import role_of
from dashboard.views import overview  # noqa: F401  (registers the overview's ticker)

PAGES = (
    "overview",
    "traffic",
    "agents",
    "agent",
    "tasks",
    "task",
    "audit",
    "escalations",
    "escalation",
    "policy",
    "trace",
    "traces",
)
FEED_PAGES = ("overview", "traffic", "agent")
MAX_BACKLOG = 50
# A page that re-fetches what it shows (the task board, a task) does so at most this often.
REFRESH_SECONDS = 1.0


# The most rows a feed keeps (static/js/hub.js drops older ones from the page).
FEED_ROWS = 300


class Shown:
    """The rows a page's feed shows, oldest first: so a message gets one row, and in-place
    updates (a latency, a task's state) go only to rows that are there."""

    def __init__(self) -> None:
        self.rows: OrderedDict[int, str] = OrderedDict()  # message pk -> its task id
        self.tasks: dict[str, int] = {}  # task id -> how many of the rows are its

    def add(self, message_pk: int, task_id: str) -> None:
        rows, tasks = self.rows, self.tasks
        rows[message_pk] = task_id
        tasks[task_id] = tasks.get(task_id, 0) + 1
        if len(rows) > FEED_ROWS:
            _, dropped = rows.popitem(last=False)
            left = tasks[dropped] - 1
            if left:
                tasks[dropped] = left
            else:
                del tasks[dropped]


def feed_rows(filters: TrafficFilter, *, agent_id: int | None) -> tuple[str, Shown]:
    """The newest rows for `filters`, replacing the feed's, and what they show (sync: database
    thread)."""
    rows = traffic_recent(filters=filters, limit=100)
    html = render_to_string("dashboard/traffic.html#rows", {"messages": rows})
    return f'<tbody id="feed-rows" hx-swap-oob="innerHTML">{html}</tbody>', _shown(rows)


def feed_shown(filters: TrafficFilter) -> Shown:
    """What the feed drawn by the page for `filters` shows (sync: database thread)."""
    return _shown(traffic_recent(filters=filters, limit=100))


def _shown(rows: list[FeedRow]) -> Shown:
    shown = Shown()
    for row in reversed(rows):  # newest first: the oldest is added first
        shown.add(row.pk, row.task_id)
    return shown


def _local_path(value: str) -> str:
    """`value` if it is a path on this site, else ""."""
    return value if value.startswith("/") and not value.startswith("//") else ""


def agent_id_of(slug: str) -> int | None:
    return Agent.objects.filter(slug=slug).values_list("pk", flat=True).first() if slug else None


class DashboardConsumer(Consumer):
    page = "other"
    role: str | None = None
    sender: asyncio.Task[None] | None = None
    refresh_later: asyncio.TimerHandle | None = None
    reloading: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        self.role = await db(role_of, self.scope.get("user"))
        if self.role is None:
            await self.close(code=4401)  # before accepting: the handshake is refused
            return
        params = {k: v[-1] for k, v in parse_qs(self.scope["query_string"].decode()).items()}
        page = params.get("page", "")
        self.page = page if page in PAGES else "other"
        self.task_id = params.get("task", "")
        # An escalation's page: the escalation it shows.
        escalation = params.get("escalation", "")
        self.escalation_id = int(escalation) if escalation.isdigit() and len(escalation) < 12 else 0
        # The root of the task's delegation chain: the task page draws the whole chain.
        self.root_id = params.get("root", "")
        # The page's own address, for pages that re-fetch what they show.
        self.url = _local_path(params.get("url", ""))
        self.refreshed_at = -REFRESH_SECONDS
        self.paused = False
        await self._filter(params)
        self.shown = await db(feed_shown, self.filters) if self.page in FEED_PAGES else Shown()
        self.outbox: deque[str] = deque()
        await self.accept()
        live.relay().join(self)

    async def disconnect(self, code: int) -> None:
        if self.role is None:
            return
        live.relay().leave(self)
        if self.refresh_later is not None:
            self.refresh_later.cancel()
        if self.sender is not None:
            self.sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.sender

    async def _filter(self, values: dict[str, Any]) -> None:
        self.filters = TrafficFilter.from_values(values)
        self.agent_id = await db(agent_id_of, self.filters.agent)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """The page's filter form, sent with htmx `ws-send`."""
        try:
            values = json.loads(text_data or "{}")
        except (ValueError, RecursionError):  # not JSON, or nested too deep
            return
        if not isinstance(values, dict) or self.page not in FEED_PAGES:
            return
        if holds_nul(values) or holds_lone_surrogate(values):  # no filter can match them
            return
        before = (self.filters, self.paused)
        self.paused = bool(values.get("paused"))
        await self._filter(values)
        if (self.filters, self.paused) != before and not self.paused:
            # Show what matches now, including what arrived while paused.
            await self._reload_feed()

    async def _reload_feed(self) -> None:
        html, self.shown = await db(feed_rows, self.filters, agent_id=self.agent_id)
        self.post(html)

    def offer(self, update: live.Update) -> None:
        self.post(self.frame(update))

    def post(self, frame: str) -> None:
        """Send `frame` to the browser after what it was sent before.

        Written before this returns, as long as the browser has taken everything before it:
        the sending task starts eagerly and ends without waiting unless the socket is full. A
        task that wakes to send each frame cost a flush to 100 open pages about as much CPU as
        the writes themselves (bench/README.md, "The live feed's frames"). A browser that
        does not keep up gets its frames merged, and past MAX_BACKLOG a reload instead."""
        if not frame:
            return
        if len(self.outbox) >= MAX_BACKLOG:
            self.outbox.clear()
            frame = render_to_string("dashboard/base_fragments.html#behind")
        self.outbox.append(frame)
        if self.sender is None or self.sender.done():
            self.sender = asyncio.eager_task_factory(
                asyncio.get_running_loop(), self._send_frames()
            )

    def pending(self) -> asyncio.Task[None] | None:
        """The task still writing frames to a browser that has not taken them yet, if any."""
        sender = self.sender
        return sender if sender is not None and not sender.done() else None

    def frame(self, update: live.Update) -> str:
        """What of `update` this page shows, as out-of-band fragments; the feed's rows first
        (see `messages`)."""
        parts = []
        if self.page in FEED_PAGES and not self.paused:
            parts.extend(self._feed(update))
        if update.badge:
            parts.append(update.badge)
        if update.agents and self.page in ("agents", "agent", "overview"):
            parts.extend(update.agents.values())
        if update.escalations and self.page == "escalations":
            # Decided items leave the page in this frame (escalations.js drops them, but for
            # one whose decision this page just made and shows); the refresh that follows
            # brings the page's next items in.
            if update.escalations_closed:
                parts.append(
                    render_to_string(
                        "dashboard/base_fragments.html#escalations-decided",
                        {"ids": sorted(update.escalations_closed)},
                    )
                )
            parts.append(render_to_string("dashboard/base_fragments.html#refresh-escalations"))
        if (
            self.page == "task"
            and self.task_id
            and (self.task_id in update.tasks or (self.root_id and self.root_id in update.chains))
        ):
            parts.append(
                self._refresh(
                    "dashboard/base_fragments.html#refresh-task", {"task_id": self.task_id}
                )
            )
        if self.page == "escalation" and self.url and self.escalation_id in update.escalations:
            parts.append(self._refresh("dashboard/escalation.html#refresh", {"url": self.url}))
        if self.page == "trace" and self.url and self.root_id in update.chains:
            parts.append(self._refresh("dashboard/trace.html#refresh", {"url": self.url}))
        if self.page == "tasks" and update.tasks:
            parts.append(self._refresh("dashboard/tasks.html#refresh", {}))
        if self.page == "traces" and update.tasks:
            parts.append(self._refresh("dashboard/traces.html#refresh", {}))
        if update.policy and self.page == "policy":
            parts.append(update.policy)
        if self.page in update.ticks:
            parts.append(update.ticks[self.page])
        return "".join(parts)

    def _feed(self, update: live.Update) -> list[str]:
        """The feed's new rows (each message once), then its rows' in-place updates."""
        parts = []
        rows = []
        shown = self.shown
        for row in update.rows_passing(self.filters, self.agent_id):
            if row.message_pk not in shown.rows:
                shown.add(row.message_pk, row.task_id)
                rows.append(row.html)
        if rows:
            parts.append(f'<tbody hx-swap-oob="afterbegin:#feed-rows">{"".join(rows)}</tbody>')
        changed = [pk for pk in update.task_states if pk in self.shown.tasks]
        moved = (update.task_states and self.filters.state) or (
            update.decisions and self.filters.decision
        )
        if moved and self.reloading is None:
            # A task's new state or a message's new decision may move rows into or out of
            # the filter: draw it anew.
            self.reloading = asyncio.get_running_loop().create_task(self._reload_soon())
        parts.extend(update.task_states[pk] for pk in changed)
        parts.extend(html for pk, html in update.latencies.items() if pk in self.shown.rows)
        parts.extend(html for pk, html in update.decisions.items() if pk in self.shown.rows)
        return parts

    async def _reload_soon(self) -> None:
        try:
            await self._reload_feed()
        finally:
            self.reloading = None

    def _refresh(self, template: str, context: dict[str, Any]) -> str:
        """The page's refresh trigger, at most once per REFRESH_SECONDS: at once after a quiet
        spell, else (once) at the end of the window — a busy hub costs an open page one
        request a second, and its last change always shows."""
        if self.refresh_later is not None:
            return ""  # one is due already
        loop = asyncio.get_running_loop()
        wait = self.refreshed_at + REFRESH_SECONDS - loop.time()
        if wait <= 0:
            self.refreshed_at = loop.time()
            return render_to_string(template, context)
        self.refresh_later = loop.call_later(wait, self._refresh_due, template, context)
        return ""

    def _refresh_due(self, template: str, context: dict[str, Any]) -> None:
        self.refresh_later = None
        self.refreshed_at = asyncio.get_running_loop().time()
        self.post(render_to_string(template, context))

    async def _send_frames(self) -> None:
        """Write what the outbox holds, merged, until it is empty."""
        try:
            while self.outbox:
                frames = list(self.outbox)
                self.outbox.clear()
                for text in messages(frames):
                    await self.send(text_data=text)
        except OSError:  # the browser left: `disconnect` follows
            self.outbox.clear()


def messages(frames: list[str]) -> list[str]:
    """`frames` joined into as few websocket messages as the browser reads right.

    htmx parses a message as a <template>'s content: table rows (a <tbody>) survive only when
    the message opens with them — after anything else the parser drops them, rows and all. So
    each frame that carries rows starts a message of its own.
    """
    joined: list[str] = []
    for frame in frames:
        if joined and not frame.startswith("<tbody"):
            joined[-1] += frame
        else:
            joined.append(frame)
    return joined
