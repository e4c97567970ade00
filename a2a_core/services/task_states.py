"""The A2A 1.0 task state machine, enforced: every change of state is checked, logged as an event
of the task and published after commit."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import transaction
from django.utils import timezone

from a2a_core.errors import IllegalTransition, NotFound
from a2a_core.events import publish_traffic_on_commit
from a2a_core.models import (
    ALLOWED_TRANSITIONS,
    TASK_STATES,
    TERMINAL_STATES,
    Task,
    TaskEvent,
    TaskEventKind,
    TaskState,
)
from a2a_core.schemas.events import TaskItem, TaskRow
from a2a_core.selectors.task_wire import status_update


def check_transition(task_id: str, current: str, new: str) -> None:
    """Raise `IllegalTransition` unless the A2A state machine allows current -> new."""
    if new not in TASK_STATES:
        raise IllegalTransition(
            f"{new!r} is not a task state; valid: {', '.join(TaskState.values)}"
        )
    if new in ALLOWED_TRANSITIONS[current]:
        return
    if current in TERMINAL_STATES:
        raise IllegalTransition(
            f"task {task_id} is {current}, a terminal state: it cannot become {new}",
            details={"taskId": task_id, "state": current, "requested": new},
        )
    allowed = ", ".join(sorted(ALLOWED_TRANSITIONS[current]))
    raise IllegalTransition(
        f"task {task_id} cannot go from {current} to {new} (allowed from {current}: {allowed})",
        details={"taskId": task_id, "state": current, "requested": new},
    )


def task_item(task: Task, change: str) -> TaskItem:
    """A task change as the `traffic` event lists it (plain fields only)."""
    return TaskItem(
        change=change,
        task_id=task.pk,
        context_id=task.context_id,
        state=task.state,
        caller_id=task.caller_id,
        target_id=task.target_id,
        root_id=task.root_id,
        seq=task.event_seq,
        # What the task's row in the live feed shows, besides its agents (see `message_item`).
        row=TaskRow(updated_at=task.updated_at.isoformat(), reason=task.reason)
        if task.updated_at is not None
        else None,
    )


def record_event(task: Task, *, kind: str, payload: dict[str, Any], state: str = "") -> TaskEvent:
    """Append an event to the task's log (caller holds the task row lock and saves the task)."""
    task.event_seq += 1
    return TaskEvent.objects.create(
        task=task, seq=task.event_seq, kind=kind, state=state, payload=payload
    )


def publish_task_change(task: Task, change: str) -> None:
    publish_traffic_on_commit([task_item(task, change)], {task.pk: task.event_seq})


@transaction.atomic
def task_transition(
    *,
    task_id: str,
    state: str,
    status_message: dict[str, Any] | None = None,
    reason: str = "",
    metadata: dict[str, Any] | None = None,
) -> Task:
    """Move a task to `state`, record the status update and publish it after commit.

    Locks the task row, so concurrent updates apply one after the other and each sees the
    state the previous one left. Raises `IllegalTransition` (nothing is written) when the A2A
    state machine forbids the change, e.g. anything after a terminal state.
    """
    task = Task.objects.select_for_update().filter(pk=task_id).first()
    if task is None:
        raise NotFound(f"task {task_id} does not exist")
    task_set_state(task, state, status_message=status_message, reason=reason, metadata=metadata)
    return task


def task_set_state(
    task: Task,
    state: str,
    *,
    status_message: dict[str, Any] | None = None,
    reason: str = "",
    metadata: dict[str, Any] | None = None,
    also_save: Sequence[str] = (),
) -> None:
    """Move `task` (locked by the caller) to `state`: record the status update, save the
    task (with the fields in `also_save`) and publish the change after commit."""
    check_transition(task.pk, task.state, state)
    task.state = state
    task.status_message = status_message
    task.status_timestamp = timezone.now()
    if state in TERMINAL_STATES and reason:
        task.reason = reason
    record_event(
        task, kind=TaskEventKind.STATUS, payload=status_update(task, metadata), state=state
    )
    task.save(
        update_fields=[
            "state",
            "status_message",
            "status_timestamp",
            "reason",
            "event_seq",
            "updated_at",
            *also_save,
        ]
    )
    publish_task_change(task, "status")
