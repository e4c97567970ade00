"""Task lifecycle: the A2A 1.0 state machine, enforced, with every change logged as an event."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from a2a_core.errors import IllegalTransition, NotFound
from a2a_core.events import event, publish_many_on_commit
from a2a_core.models import (
    ALLOWED_TRANSITIONS,
    TERMINAL_STATES,
    Task,
    TaskEvent,
    TaskEventKind,
    TaskState,
)


def wire_state(state: str) -> str:
    """`input-required` -> `TASK_STATE_INPUT_REQUIRED`."""
    return "TASK_STATE_" + state.upper().replace("-", "_")


def state_from_wire(value: str) -> str:
    """`TASK_STATE_INPUT_REQUIRED` (or `input-required`) -> `input-required`."""
    name = value.removeprefix("TASK_STATE_").lower().replace("_", "-")
    if name not in TaskState.values:
        raise ValueError(f"unknown task state {value!r}")
    return name


def check_transition(task_id: str, current: str, new: str) -> None:
    """Raise `IllegalTransition` unless the A2A state machine allows current -> new."""
    if new not in TaskState.values:
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


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def status_payload(task: Task) -> dict[str, Any]:
    """The task's current status as an A2A TaskStatus (ProtoJSON)."""
    status: dict[str, Any] = {
        "state": wire_state(task.state),
        "timestamp": iso(task.status_timestamp),
    }
    if task.status_message:
        status["message"] = task.status_message
    return status


def _traffic_fields(task: Task) -> dict[str, Any]:
    return {
        "task_id": task.pk,
        "context_id": task.context_id,
        "state": task.state,
        "caller_id": task.caller_id,
        "target_id": task.target_id,
        "root_id": task.root_id,
        "seq": task.event_seq,
    }


def record_event(task: Task, *, kind: str, payload: dict[str, Any], state: str = "") -> TaskEvent:
    """Append an event to the task's log (caller holds the task row lock and saves the task)."""
    task.event_seq += 1
    return TaskEvent.objects.create(
        task=task, seq=task.event_seq, kind=kind, state=state, payload=payload
    )


def publish_task_event(task: Task, name: str, **extra: Any) -> None:
    payload = event(name, **_traffic_fields(task), **extra)
    groups = [f"task.{task.pk}", "traffic", f"agent.{task.target_id}"]
    if task.caller_id:
        groups.append(f"agent.{task.caller_id}")
    if task.root_id and task.root_id != task.pk:
        groups.append(f"task.{task.root_id}")
    publish_many_on_commit([(group, payload) for group in groups])


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
    check_transition(task.pk, task.state, state)
    task.state = state
    task.status_message = status_message
    task.status_timestamp = timezone.now()
    if state in TERMINAL_STATES and reason:
        task.reason = reason
    update: dict[str, Any] = {
        "taskId": task.pk,
        "contextId": task.context_id,
        "status": status_payload(task),
    }
    if metadata:
        update["metadata"] = metadata
    record_event(task, kind=TaskEventKind.STATUS, payload={"statusUpdate": update}, state=state)
    task.save(
        update_fields=[
            "state",
            "status_message",
            "status_timestamp",
            "reason",
            "event_seq",
            "updated_at",
        ]
    )
    publish_task_event(task, "task.status")
    return task
