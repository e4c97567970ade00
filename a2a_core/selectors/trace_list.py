"""Reads for the trace list: every trace (a root task and the tasks delegated from it), newest
first, filtered by agent, pair, state, duration, error, decision and time.

Pages are keyset-paginated on the root task's (created_at, id), newest first, with no COUNT
and no page OFFSET, walking the partial index of root tasks (`task_roots`). Time and the
root's state narrow that walk in SQL. The filters about a whole trace (an agent or a pair
anywhere on it, an error, a decision, its duration) look through at most `WINDOW` traces from
where the page starts and, when that leaves the page short, say where they stopped, as the
audit's text search does: the traces that have the agent's, the pair's or a failed task, or a
message of the decision, are read once down one index each from the window's edge on
(`_narrowed`); the roots left are described a batch of `BATCH` at a time from their tasks (one
read by the `trace_id` index) and their decisions, and checked in Python (`_matches`: the
duration, and what the indexes could only narrow). A trace's duration runs from its root's
creation to its last task's end (now, while one still runs). `bench/trace_list.py` times it.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from a2a_core.errors import FieldProblem, ValidationFailed
from a2a_core.models import ACTIVE_STATES, TERMINAL_STATES, Agent, Decision, Message, Task

PAGE_SIZE = 50
# How many traces one page looks through for the filters about whole traces, and how many
# at a time.
WINDOW = 5_000
BATCH = 250
ERROR_STATES = frozenset({"failed", "rejected", "canceled"})
STATES = (
    "running",
    "submitted",
    "working",
    "input-required",
    "auth-required",
    *sorted(TERMINAL_STATES),
)

Position = tuple[datetime, str]  # (created_at, id) of a root task


@dataclass(frozen=True)
class TraceFilter:
    """Which traces: every field given must match. `agent`, `caller` and `target` are slugs
    (the pair matches one task of the trace with that caller and target); `state` is the
    root task's, or `running`; durations in milliseconds."""

    agent: str = ""
    caller: str = ""
    target: str = ""
    state: str = ""
    min_ms: int | None = None
    max_ms: int | None = None
    errors: bool = False  # a task of the trace failed, was rejected or canceled
    decision: str = ""  # a message of the trace got this decision
    since: datetime | None = None  # the root's creation, inclusive
    until: datetime | None = None  # exclusive

    @property
    def about_whole_traces(self) -> bool:
        return bool(
            self.agent
            or self.caller
            or self.target
            or self.errors
            or self.decision
            or self.min_ms is not None
            or self.max_ms is not None
        )


@dataclass
class TraceRow:
    root: Task
    trace_id: str
    start: datetime
    end: datetime | None  # None: still running
    duration_ms: int
    tasks: int = 0
    agents: list[str] = field(default_factory=list)
    errors: int = 0
    # decision -> how many messages of the trace got it (deliveries not counted)
    decisions: dict[str, int] = field(default_factory=dict)
    # (caller id, target id) of each task
    pairs: set[tuple[int | None, int]] = field(default_factory=set, repr=False)

    @property
    def running(self) -> bool:
        return self.end is None


@dataclass(frozen=True)
class TracePage:
    rows: list[TraceRow]
    older: str = ""  # the cursor of the next page, if any
    # The filters about whole traces looked through `scanned` traces without filling the
    # page: they stopped at this moment (`older` goes on from there).
    searched_to: datetime | None = None
    scanned: int = 0


def encode_cursor(position: Position) -> str:
    moment, pk = position
    return base64.urlsafe_b64encode(f"{moment.isoformat()}|{pk}".encode()).decode().rstrip("=")


def decode_cursor(token: str) -> Position:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
        moment, pk = raw.split("|")
        when = datetime.fromisoformat(moment)
        if when.tzinfo is None or not pk:
            raise ValueError(moment)
        return when, pk
    except (ValueError, UnicodeDecodeError):
        raise ValidationFailed(
            "invalid cursor",
            [FieldProblem("cursor", "this page link is not one the hub made; start again")],
        ) from None


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min)?\s*$")


def parse_duration_ms(text: str, name: str) -> int | None:
    """`250ms`, `2s`, `1.5` (seconds), `3m`: milliseconds; None when blank. Raises
    `ValidationFailed` naming the field."""
    if not text.strip():
        return None
    found = _DURATION.match(text)
    if found is None:
        raise ValidationFailed(
            f"invalid {name}",
            [FieldProblem(name, "a duration such as 250ms, 2s or 3m")],
        )
    value, unit = float(found.group(1)), found.group(2) or "s"
    scale = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000}[unit]
    return min(int(value * scale), 10**12)


def trace_page(
    *, filters: TraceFilter, cursor: str = "", limit: int = PAGE_SIZE, now: datetime | None = None
) -> TracePage:
    """One page of the filtered traces, newest first, and the cursor of the next."""
    now = now or timezone.now()
    agents = _agent_ids(filters)
    if agents is None:
        return TracePage(rows=[])
    # Roots are the tasks of depth 0, which is what the partial index `task_roots` holds.
    roots = Task.objects.filter(depth=0).select_related("caller", "target")
    if filters.state == "running":
        roots = roots.filter(state__in=sorted(ACTIVE_STATES | {"input-required", "auth-required"}))
    elif filters.state:
        roots = roots.filter(state=filters.state)
    if filters.since is not None:
        roots = roots.filter(created_at__gte=filters.since)
    if filters.until is not None:
        roots = roots.filter(created_at__lt=filters.until)
    position = decode_cursor(cursor) if cursor else None
    edge: Position | None = None
    if filters.about_whole_traces:
        # The window: the database looks no further back than WINDOW traces from here.
        edges = list(
            _older(roots, position)
            .order_by("-created_at", "-id")
            .values_list("created_at", "id")[WINDOW - 1 : WINDOW]
        )
        edge = edges[0] if edges else None
        roots = _narrowed(roots, filters, agents, edge[0] if edge else None)
        if edge is not None:
            moment, pk = edge
            roots = roots.filter(created_at__gte=moment).exclude(created_at=moment, pk__lt=pk)
    rows: list[TraceRow] = []
    while len(rows) <= limit:
        batch = list(
            _older(roots, position)
            .defer("status_message", "metadata", "path")
            .order_by("-created_at", "-id")[: BATCH if filters.about_whole_traces else limit + 1]
        )
        if not batch:
            break
        position = (batch[-1].created_at, batch[-1].pk)
        found = _described(batch, now)
        _count_decisions(found, now)
        rows.extend(found[root.pk] for root in batch if _matches(found[root.pk], filters, agents))
    if len(rows) > limit:
        kept = rows[:limit]
        return TracePage(
            rows=kept, older=encode_cursor((kept[-1].root.created_at, kept[-1].root.pk))
        )
    if edge is None:
        return TracePage(rows=rows)
    # The window ran out before the page filled: go on from the last trace looked at.
    return TracePage(rows=rows, older=encode_cursor(edge), searched_to=edge[0], scanned=WINDOW)


def _narrowed(
    roots: QuerySet[Task], filters: TraceFilter, agents: dict[str, int], since: datetime | None
) -> QuerySet[Task]:
    """The roots whose trace may match the filters about whole traces: those with a task of
    the agent or the pair asked for, a failed task or a refusal, a message of the decision.
    Each is a set of trace ids read once down one index (caller, target, state, decision),
    from `since` (the window's edge) on, then looked up for each root walked; what is left
    (durations, and counting) is checked in Python."""

    def traces(where: Q) -> QuerySet[Task, Any]:
        tasks = Task.objects.filter(where)
        if since is not None:
            tasks = tasks.filter(status_timestamp__gte=since)
        return tasks.values("trace_id")

    def decided(decision: str) -> QuerySet[Message, Any]:
        # Down the (decision, created_at) index: refused calls without a task included.
        messages = Message.objects.filter(decision=decision)
        if since is not None:
            messages = messages.filter(created_at__gte=since)
        return messages.values("trace_id")

    if "agent" in agents:
        agent = agents["agent"]
        roots = roots.filter(
            Q(trace_id__in=traces(Q(caller_id=agent))) | Q(trace_id__in=traces(Q(target_id=agent)))
        )
    pair = {f"{name}_id": agents[name] for name in ("caller", "target") if name in agents}
    if pair:
        roots = roots.filter(trace_id__in=traces(Q(**pair)))
    if filters.errors:
        roots = roots.filter(
            Q(trace_id__in=traces(Q(state__in=sorted(ERROR_STATES))))
            | Q(trace_id__in=decided(Decision.REJECT))
        )
    if filters.decision and filters.decision != Decision.DELIVER:
        roots = roots.filter(trace_id__in=decided(filters.decision))
    return roots


def matching_roots(filters: TraceFilter, *, limit: int, pages: int = 20) -> list[str]:
    """The root tasks of the first `limit` traces that match, newest first, looking through at
    most `pages` pages (each a window of traces, for the filters about whole traces)."""
    ids: list[str] = []
    cursor = ""
    for _ in range(pages):
        page = trace_page(filters=filters, cursor=cursor)
        ids.extend(row.root.pk for row in page.rows)
        if len(ids) >= limit or not page.older:
            break
        cursor = page.older
    return ids[:limit]


def _older(roots: QuerySet[Task], position: Position | None) -> QuerySet[Task]:
    if position is None:
        return roots
    moment, pk = position
    # The plain range condition lets the database start the index scan at `moment`.
    return roots.filter(created_at__lte=moment).filter(Q(created_at__lt=moment) | Q(pk__lt=pk))


def _agent_ids(filters: TraceFilter) -> dict[str, int] | None:
    """The ids of the agents the filters name; None when one of them is not registered
    (nothing can match)."""
    wanted = {
        name: slug
        for name, slug in (
            ("agent", filters.agent),
            ("caller", filters.caller),
            ("target", filters.target),
        )
        if slug
    }
    if not wanted:
        return {}
    known = dict(Agent.objects.filter(slug__in=set(wanted.values())).values_list("slug", "pk"))
    if any(slug not in known for slug in wanted.values()):
        return None
    return {name: known[slug] for name, slug in wanted.items()}


def _described(roots: list[Task], now: datetime) -> dict[str, TraceRow]:
    """Each root's trace described from its tasks: one read by the trace_id index."""
    by_trace: dict[str, list[Task]] = {}
    for root in roots:
        by_trace.setdefault(root.trace_id, []).append(root)
    slugs: dict[int, str] = {}
    tasks: dict[str, list[tuple[int | None, int, str, datetime]]] = {}
    for trace_id, caller_id, target_id, state, ended in Task.objects.filter(
        trace_id__in=list(by_trace)
    ).values_list("trace_id", "caller_id", "target_id", "state", "status_timestamp"):
        tasks.setdefault(trace_id, []).append((caller_id, target_id, state, ended))
    ids = {pk for found in tasks.values() for c, t, _, _ in found for pk in (c, t) if pk}
    slugs = dict(Agent.objects.filter(pk__in=ids).values_list("pk", "slug"))
    rows: dict[str, TraceRow] = {}
    for root in roots:
        found = tasks.get(root.trace_id, [])
        running = any(state not in TERMINAL_STATES for _, _, state, _ in found)
        end = None if running else max([ended for *_, ended in found] + [root.status_timestamp])
        rows[root.pk] = TraceRow(
            root=root,
            trace_id=root.trace_id,
            start=root.created_at,
            end=end,
            duration_ms=max(0, int(((end or now) - root.created_at).total_seconds() * 1000)),
            tasks=len(found),
            agents=sorted({slugs[pk] for c, t, _, _ in found for pk in (c, t) if pk in slugs}),
            errors=sum(1 for _, _, state, _ in found if state in ERROR_STATES),
            pairs={(c, t) for c, t, _, _ in found},
        )
    return rows


def _count_decisions(rows: dict[str, TraceRow], now: datetime) -> None:
    """How many messages of each trace got each decision other than deliver: those on its
    tasks, and calls refused before they became tasks (found by the decision's index, in the
    traces' time)."""
    traces = {row.trace_id: row for row in rows.values()}
    if not traces:
        return
    start = min(row.start for row in rows.values())
    end = max(row.end or now for row in rows.values())
    on_tasks = Message.objects.filter(task__trace_id__in=list(traces), direction="request").exclude(
        decision=Decision.DELIVER
    )
    refused = Message.objects.filter(
        decision=Decision.REJECT,
        task__isnull=True,
        created_at__gte=start,
        created_at__lte=end,
        trace_id__in=list(traces),
    )
    seen: set[int] = set()
    for query in (on_tasks, refused):
        for pk, trace_id, decision in query.values_list("pk", "trace_id", "decision"):
            if pk in seen or trace_id not in traces:
                continue
            seen.add(pk)
            counts = traces[trace_id].decisions
            counts[decision] = counts.get(decision, 0) + 1


def _matches(row: TraceRow, filters: TraceFilter, agents: dict[str, int]) -> bool:
    pairs = row.pairs
    if "agent" in agents and not any(agents["agent"] in pair for pair in pairs):
        return False
    caller, target = agents.get("caller"), agents.get("target")
    if (caller or target) and not any(
        (caller is None or c == caller) and (target is None or t == target) for c, t in pairs
    ):
        return False
    if filters.errors and not (row.errors or row.decisions.get(Decision.REJECT)):
        return False
    if filters.decision:
        if filters.decision == Decision.DELIVER:
            if not row.tasks:
                return False
        elif not row.decisions.get(filters.decision):
            return False
    if filters.min_ms is not None and row.duration_ms < filters.min_ms:
        return False
    return filters.max_ms is None or row.duration_ms <= filters.max_ms
