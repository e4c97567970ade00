"""Reads of a task's recorded event log, for the streams that follow it."""

from __future__ import annotations

from typing import Any, NamedTuple

from a2a_core.models import Task, TaskEvent
from a2a_core.selectors.task_wire import task_view


class EventRow(NamedTuple):
    seq: int
    kind: str
    payload: dict[str, Any]


class EventsAfter(NamedTuple):
    """The task's events after a seq, its state, and the seq of the event that state came
    with."""

    rows: list[EventRow]
    state: str
    state_seq: int


class TaskSnapshot(NamedTuple):
    """The task's wire view, the seq of its last event, and its state: a stream starts with
    the view and follows the events after `seq`."""

    view: dict[str, Any]
    seq: int
    state: str


def task_events_after(*, task_id: str, after: int) -> EventsAfter:
    """The task's events after `after`, its state, and the seq of the event that state came
    with."""
    # The state first: a task's state and its events commit together, so the events read
    # after it include every event up to that state, even if another writer (another worker,
    # or the loop's own thread) commits between the two reads. The other way round, a stream
    # could see the task ended without its last event.
    state, state_seq = Task.objects.filter(pk=task_id).values_list(
        "state", "event_seq"
    ).first() or ("", 0)
    rows = [
        EventRow(*row)
        for row in TaskEvent.objects.filter(task_id=task_id, seq__gt=after)
        .order_by("seq")
        .values_list("seq", "kind", "payload")
    ]
    return EventsAfter(rows, state, state_seq)


def task_snapshot(*, task_id: str, history_length: int | None) -> TaskSnapshot:
    task = Task.objects.get(pk=task_id)
    return TaskSnapshot(task_view(task, history_length=history_length), task.event_seq, task.state)
