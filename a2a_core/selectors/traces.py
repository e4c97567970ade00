"""A whole delegation as one timeline: every task and message of a trace (or of a
conversation and the hops delegated from it) on one time axis.

A span is a bar: a task from its creation to its end, or the wait for a human on a held
message. Marks are points on a bar: the messages of the task with the hub's decision on each,
its status changes, and the refusals of calls it tried to make (a refused call has no task).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Q, QuerySet
from django.utils import timezone

from a2a_core.errors import NotFound
from a2a_core.models import (
    Escalation,
    Message,
    Task,
    TaskEvent,
    TaskEventKind,
)
from a2a_core.models.task import TERMINAL_STATES

# The most tasks and messages one trace draws; a longer run says how many were left out.
TASK_LIMIT = 500
MESSAGE_LIMIT = 3000


@dataclass(frozen=True)
class Mark:
    """A moment on a span: a message, a status change, a refusal."""

    at: datetime
    kind: str  # request | reply | status | refused | held | redirected
    label: str
    detail: str = ""
    message_pk: int | None = None
    state: str = ""


@dataclass
class Span:
    key: str
    kind: str  # task | wait
    label: str
    depth: int
    start: datetime
    end: datetime | None  # None: still running
    state: str = ""
    task_id: str = ""
    trace_id: str = ""
    caller: str = ""
    target: str = ""
    detail: str = ""
    marks: list[Mark] = field(default_factory=list)


@dataclass
class Trace:
    """What the trace page draws. `start`/`end` bound every span and mark."""

    title: str
    trace_ids: list[str]
    root_id: str
    context_ids: list[str]
    spans: list[Span]
    agents: list[str]
    start: datetime
    end: datetime
    running: bool
    tasks_left_out: bool = False


def trace_get(*, trace_id: str) -> Trace:
    """Every task and message of trace `trace_id`. Raises `NotFound`."""
    tasks = list(_tasks().filter(trace_id=trace_id).order_by("created_at", "pk")[: TASK_LIMIT + 1])
    if not tasks:
        raise NotFound(f"no task has trace {trace_id}")
    return _trace(f"trace {trace_id}", tasks[:TASK_LIMIT], len(tasks) > TASK_LIMIT)


def trace_of_context(*, context_id: str) -> Trace:
    """The tasks of conversation `context_id` and every task delegated from them, however
    deep (delegated calls have contexts of their own). Raises `NotFound`."""
    tasks = context_tasks(context_id=context_id)
    if not tasks:
        raise NotFound(f"no task has context {context_id}")
    return _trace(f"conversation {context_id}", tasks[:TASK_LIMIT], len(tasks) > TASK_LIMIT)


def context_tasks(*, context_id: str) -> list[Task]:
    """The tasks of `context_id` and their descendants, oldest first."""
    own = list(_tasks().filter(context_id=context_id).order_by("created_at", "pk")[:TASK_LIMIT])
    roots = {t.root_id or t.pk for t in own}
    if not roots:
        return []
    family = list(
        _tasks()
        .filter(Q(pk__in=roots) | Q(root_id__in=roots))
        .order_by("created_at", "pk")[: TASK_LIMIT * 2]
    )
    children: dict[str, list[Task]] = {}
    for task in family:
        if task.parent_id:
            children.setdefault(task.parent_id, []).append(task)
    found: dict[str, Task] = {t.pk: t for t in own}
    queue = list(own)
    while queue:
        for child in children.get(queue.pop().pk, ()):
            if child.pk not in found:
                found[child.pk] = child
                queue.append(child)
    return sorted(found.values(), key=lambda t: (t.created_at, t.pk))


def _tasks() -> QuerySet[Task]:
    return Task.objects.select_related("caller", "target", "addressed_to").defer(
        "status_message", "metadata"
    )


def span_bounds(
    task: Task, requests: list[Message], *, now: datetime | None = None
) -> tuple[datetime, datetime | None]:
    """Where a task's span starts (its first call's receipt, else its creation) and ends
    (its end, or its answer's record when that came later; None while it runs)."""
    start = task.created_at
    if requests:
        received = (requests[0].call_times or {}).get("received")
        if isinstance(received, int):
            start = min(start, requests[0].created_at + timedelta(microseconds=received))
    if task.state not in TERMINAL_STATES:
        return start, None
    end = task.status_timestamp
    for message in requests:
        recorded = (message.call_times or {}).get("recorded")
        if isinstance(recorded, int):
            end = max(end, message.created_at + timedelta(microseconds=recorded))
    return start, max(end, start)


def _in_tree_order(tasks: list[Task]) -> list[Task]:
    """Parents before their children, siblings by creation: the order a waterfall reads."""
    ids = {t.pk for t in tasks}
    children: dict[str | None, list[Task]] = {}
    for task in tasks:
        parent = task.parent_id if task.parent_id in ids else None
        children.setdefault(parent, []).append(task)
    ordered: list[Task] = []
    stack = list(reversed(children.get(None, [])))
    while stack:
        task = stack.pop()
        ordered.append(task)
        stack.extend(reversed(children.get(task.pk, [])))
    return ordered


HUMAN_DECISIONS = frozenset({"approved_by_human", "redirected_by_human", "rejected_by_human"})


def _message_mark(message: Message) -> Mark:
    pair = f"{_slug(message.sender) or 'human'} → {_slug(message.target) or 'caller'}"
    if message.direction == "reply":
        return Mark(message.created_at, "reply", f"reply {pair}", message.summary, message.pk)
    # A held message a human decided on reads as held, then what the human decided.
    decided = message.decision_reason in HUMAN_DECISIONS
    kind = (
        "held"
        if decided
        else {"reject": "refused", "hold": "held", "redirect": "redirected"}.get(
            message.decision, "request"
        )
    )
    words = {
        "refused": f"refused: {message.decision_reason}",
        "held": "held for a human"
        + (f", {message.decision_detail}" if decided and message.decision_detail else ""),
        "redirected": f"redirected to {_slug(message.redirected_to)}",
        "request": f"{message.kind} {pair}",
    }[kind]
    detail = message.decision_detail or message.summary
    return Mark(message.created_at, kind, words, detail, message.pk)


def _slug(agent: object) -> str:
    return str(getattr(agent, "slug", "") or "")


def _status_marks(task_ids: Iterable[str]) -> dict[str, list[Mark]]:
    marks: dict[str, list[Mark]] = {}
    for task_id, state, at in (
        TaskEvent.objects.filter(task_id__in=list(task_ids), kind=TaskEventKind.STATUS)
        .order_by("task_id", "seq")
        .values_list("task_id", "state", "created_at")
    ):
        marks.setdefault(task_id, []).append(Mark(at, "status", state, state=state))
    return marks


def _refusals(tasks: list[Task], end: datetime) -> list[Message]:
    """Calls refused before they became tasks, made by agents working on these tasks."""
    traces = {t.trace_id for t in tasks}
    start = min(t.created_at for t in tasks)
    return [
        m
        for m in Message.objects.filter(
            sender_id__in={t.target_id for t in tasks},
            created_at__gte=start,
            created_at__lte=end,
            task__isnull=True,
            direction="request",
        )
        .select_related("sender", "target", "redirected_to")
        .order_by("created_at", "pk")[:MESSAGE_LIMIT]
        if m.trace_id in traces
    ]


def _trace(title: str, tasks: list[Task], left_out: bool) -> Trace:
    now = timezone.now()
    ordered = _in_tree_order(tasks)
    by_id = {t.pk: t for t in ordered}
    running = any(t.state not in TERMINAL_STATES for t in ordered)
    messages = list(
        Message.objects.filter(task_id__in=list(by_id))
        .select_related("sender", "target", "redirected_to")
        .order_by("created_at", "pk")[:MESSAGE_LIMIT]
    )
    statuses = _status_marks(by_id)
    holds: dict[str, list[Escalation]] = {}
    for escalation in Escalation.objects.filter(task_id__in=list(by_id)).order_by("created_at"):
        holds.setdefault(escalation.task_id, []).append(escalation)
    marks: dict[str, list[Mark]] = {pk: [] for pk in by_id}
    requests: dict[str, list[Message]] = {pk: [] for pk in by_id}
    for message in messages:
        if message.task_id in marks:
            marks[message.task_id].append(_message_mark(message))
            if message.direction == "request":
                requests[message.task_id].append(message)
    bounds = {task.pk: span_bounds(task, requests[task.pk]) for task in ordered}
    last = max(
        [t.status_timestamp for t in ordered]
        + [m.created_at for m in messages]
        + [end for _, end in bounds.values() if end is not None]
    )
    end = now if running else last
    # agent id -> its tasks in this trace, to hang refused calls on
    working: dict[int, list[Task]] = {}
    for task in ordered:
        working.setdefault(task.target_id, []).append(task)
    for refused in _refusals(ordered, end):
        candidates = [
            t for t in working.get(refused.sender_id or 0, []) if t.created_at <= refused.created_at
        ]
        if candidates:
            marks[candidates[-1].pk].append(_message_mark(refused))
    spans: list[Span] = []
    depth0 = min(t.depth for t in ordered)
    for task in ordered:
        began, ended = bounds[task.pk]
        addressed = task.addressed_to
        redirected = addressed is not None and task.addressed_to_id != task.target_id
        label = f"{_slug(task.caller) or 'hub'} → {_slug(task.target)}"
        spans.append(
            Span(
                key=task.pk,
                kind="task",
                label=label,
                depth=task.depth - depth0,
                start=began,
                end=ended,
                state=task.state,
                task_id=task.pk,
                trace_id=task.trace_id,
                caller=_slug(task.caller),
                target=_slug(task.target),
                detail=" · ".join(
                    part
                    for part in (
                        task.skill,
                        f"redirected from {_slug(addressed)}" if redirected else "",
                        task.reason,
                    )
                    if part
                ),
                marks=sorted(marks[task.pk] + statuses.get(task.pk, []), key=lambda mark: mark.at),
            )
        )
        for escalation in holds.get(task.pk, []):
            spans.append(
                Span(
                    key=f"wait-{escalation.pk}",
                    kind="wait",
                    label="waiting for a human",
                    depth=task.depth - depth0 + 1,
                    start=escalation.created_at,
                    end=escalation.decided_at,
                    state=escalation.status,
                    task_id=task.pk,
                    detail=escalation.reason or escalation.question,
                )
            )
    agents = sorted({s for t in ordered for s in (_slug(t.caller), _slug(t.target)) if s})
    start = min(began for began, _ in bounds.values())
    return Trace(
        title=title,
        trace_ids=sorted({t.trace_id for t in ordered}),
        root_id=ordered[0].root_id or ordered[0].pk,
        context_ids=sorted({t.context_id for t in ordered}),
        spans=spans,
        agents=agents,
        start=start,
        end=max(end, start),
        running=running,
        tasks_left_out=left_out,
    )
