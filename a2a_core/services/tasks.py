"""What agents report about their tasks, recorded in batches: endpoint agents' answers
(`Snapshot`, `StreamEvent`, `Reply`), the hub giving up (`Failure`) and inbox agents' reports
(`Report`). The state machine is `task_states`; what a batch writes is `task_recording`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from a2a_core.errors import FieldProblem, HubError, IllegalTransition, NotFound, ValidationFailed
from a2a_core.models import (
    TERMINAL_STATES,
    Artifact,
    Delivery,
    DeliveryState,
    Direction,
    Task,
    TaskEventKind,
    TaskState,
)
from a2a_core.models.task import new_id
from a2a_core.schemas.a2a import (
    HUB_METADATA,
    envelope_part_indexes,
)
from a2a_core.selectors.task_wire import state_from_wire, status_update, task_view
from a2a_core.services.classify import classify
from a2a_core.services.content import answer_screened
from a2a_core.services.questions import ask_human, withdraw_questions
from a2a_core.services.task_recording import Recording, RequestRef, UnitOfWork, hub_ids
from a2a_core.services.task_states import check_transition

# --- what agents answered, recorded in batches ----------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    """A whole Task an endpoint agent returned; the result is the task as the caller sees it."""

    task_id: str
    remote: dict[str, Any]
    history_length: int | None = None
    request: RequestRef | None = None


@dataclass(frozen=True)
class StreamEvent:
    """One StreamResponse an endpoint agent streamed; the result is None."""

    task_id: str
    event: dict[str, Any]
    deadline: datetime | None = None
    request: RequestRef | None = None


@dataclass(frozen=True)
class Reply:
    """A Message an endpoint agent answered with (no task); the result is that message."""

    task_id: str
    message: dict[str, Any]
    request: RequestRef | None = None


@dataclass(frozen=True)
class Failure:
    """The hub gives up on a task (agent down, timeout, lost worker, canceled). `delivery`,
    when the hub lost the delivery with a server process: whether the agent received it,
    "unknown" or "notReceived", in the status message's `metadata.a2aHub.delivery`."""

    task_id: str
    reason: str
    state: str = TaskState.FAILED
    delivery: str = ""


@dataclass(frozen=True)
class Report:
    """What an inbox agent reported on a task it works on: a status (`{"state": ...,
    "message": {...}}`, wire names) or an artifact chunk. Unlike an endpoint agent's answers,
    a report the task cannot take is refused (`IllegalTransition`, `NotFound`); one that comes
    after the task's deadline is recorded as a late reply. The result: {"late": bool,
    "duplicate": bool, "state": the task's state}."""

    task_id: str
    agent_id: int
    status: dict[str, Any] | None = None
    artifact: dict[str, Any] | None = None
    append: bool = False
    last_chunk: bool = False
    # With an input-required status: a human at the hub should answer (an escalation).
    ask_human: bool = False
    priority: str = "normal"
    # The status update's metadata.
    metadata: dict[str, Any] | None = None


Record = Snapshot | StreamEvent | Reply | Failure | Report


def _apply(work: UnitOfWork, op: Record) -> Any:
    rec = work.recording(op.task_id, getattr(op, "request", None))
    task = rec.task
    if isinstance(op, Report):
        return _report(rec, op)
    if isinstance(op, Snapshot):
        rec.learn_remote_ids(op.remote.get("id"), op.remote.get("contextId"))
        rec.task_metadata(op.remote)
        for message in op.remote.get("history") or []:
            rec.reply(message)
        for artifact in op.remote.get("artifacts") or []:
            existing = Artifact.objects.filter(
                task=task, artifact_id=artifact.get("artifactId")
            ).first()
            if existing is None or existing.parts != artifact.get("parts"):
                rec.artifact(artifact, append=False, last_chunk=True)
        rec.status(op.remote.get("status") or {})
        rec.done()
        return None  # the view is built once everything is written
    if isinstance(op, StreamEvent):
        event = op.event
        if "task" in event:
            remote = event["task"]
            rec.learn_remote_ids(remote.get("id"), remote.get("contextId"))
            rec.task_metadata(remote)
            for message in remote.get("history") or []:
                rec.reply(message)
            rec.status(remote.get("status") or {})
        elif "statusUpdate" in event:
            update = event["statusUpdate"]
            rec.learn_remote_ids(update.get("taskId"), update.get("contextId"))
            rec.status(update.get("status") or {}, metadata=update.get("metadata"), streamed=True)
        elif "artifactUpdate" in event:
            update = event["artifactUpdate"]
            rec.learn_remote_ids(update.get("taskId"), update.get("contextId"))
            if task.state not in TERMINAL_STATES:
                rec.artifact(
                    update.get("artifact") or {},
                    append=bool(update.get("append")),
                    last_chunk=bool(update.get("lastChunk")),
                    metadata=update.get("metadata"),
                )
        elif "message" in event:
            # An agent that answers a stream with a message ends the exchange with it; the
            # stream's caller, who already has the hub's task, gets it as the final status's.
            rec.reply(event["message"])
            if task.state not in TERMINAL_STATES:
                rec.status({"state": "TASK_STATE_COMPLETED", "message": event["message"]})
        rec.done(deadline=op.deadline)
        return None
    if isinstance(op, Reply):
        rec.reply(op.message, direct=True)
        if task.state not in TERMINAL_STATES:
            rec.status({"state": "TASK_STATE_COMPLETED"})
        rec.done()
        return {k: v for k, v in hub_ids(op.message, task).items() if k != "taskId"}
    if task.state not in TERMINAL_STATES:
        # Giving up is allowed from every state that is not terminal; checked all the same,
        # like every other change of state.
        check_transition(task.pk, task.state, op.state)
        task.state = op.state
        task.status_message = {
            "messageId": new_id(),
            "role": "ROLE_AGENT",
            "parts": [{"text": op.reason}],
            "taskId": task.pk,
            "contextId": task.context_id,
        }
        if op.delivery:
            task.status_message["metadata"] = {HUB_METADATA: {"delivery": op.delivery}}
        task.status_timestamp = timezone.now()
        task.reason = op.reason
        rec.event(TaskEventKind.STATUS, status_update(task), op.state)
        rec.done(delivery=DeliveryState.FAILED)
    return None


def _expired(task: Task) -> bool:
    """The task failed because its deadline passed."""
    return (
        task.state == TaskState.FAILED
        and task.deadline is not None
        and task.status_timestamp >= task.deadline
    )


def _acknowledged(agent_id: int, task_id: str) -> None:
    """Reporting on a task shows the agent received it: acknowledge its deliveries."""
    Delivery.objects.filter(
        recipient_id=agent_id,
        task_id=task_id,
        state__in=[DeliveryState.PENDING, DeliveryState.DELIVERED],
    ).update(state=DeliveryState.ACKED, acked_at=timezone.now())


def _check_response(task: Task, message: dict[str, Any]) -> None:
    """A typed answer must be valid; a `response` must carry its request's correlationId."""
    kind, envelope, _ = classify(message, default_kind="response")
    if kind != "response" or envelope is None:
        return
    asked = (
        task.messages.filter(direction=Direction.REQUEST)
        .exclude(correlation_id="")
        .order_by("pk")
        .values_list("correlation_id", flat=True)
        .first()
    )
    got = envelope.get("correlationId")
    if asked and got != asked:
        index = envelope_part_indexes(message)[0]
        raise ValidationFailed(
            "the response does not answer this task's request",
            [
                FieldProblem(
                    f"parts[{index}].data.correlationId",
                    f"this task's request has correlationId {asked!r}, the response {got!r}",
                )
            ],
        )


def _report(rec: Recording, op: Report) -> dict[str, Any]:
    task = rec.task
    if task.target_id != op.agent_id:
        raise NotFound(f"task {task.pk} is not assigned to you")
    message = (op.status or {}).get("message")
    if isinstance(message, dict):
        _check_response(task, message)
    if task.state in TERMINAL_STATES:
        if not _expired(task):
            raise IllegalTransition(
                f"task {task.pk} is already {task.state}; it takes no more reports",
                details={"taskId": task.pk, "state": task.state},
            )
        # After the deadline: the answer is kept, flagged late, and the task stays failed.
        if op.artifact is not None:
            message = {"messageId": new_id(), "role": "ROLE_AGENT", "parts": op.artifact["parts"]}
        if not isinstance(message, dict):
            raise IllegalTransition(
                f"task {task.pk} failed: no answer came before its deadline",
                details={"taskId": task.pk, "state": task.state},
            )
        duplicate = not rec.reply(message, late=True)
        rec.done()
        return {"late": True, "duplicate": duplicate, "state": task.state}
    if op.artifact is not None:
        _acknowledged(op.agent_id, task.pk)
        rec.artifact(op.artifact, append=op.append, last_chunk=op.last_chunk)
        rec.done(delivery=DeliveryState.ACKED)
        return {"late": False, "duplicate": False, "state": task.state}
    _acknowledged(op.agent_id, task.pk)
    status = op.status or {}
    state = state_from_wire(str(status.get("state", "")))
    if isinstance(message, dict) and str(message.get("messageId", "")) in rec.work.seen(task):
        return {"late": False, "duplicate": True, "state": task.state}
    if state == TaskState.SUBMITTED or (
        state == task.state and not isinstance(message, dict) and not op.metadata
    ):
        raise IllegalTransition(
            f"task {task.pk} is {task.state} already; report a new state, a message or metadata"
        )
    if state != task.state:
        check_transition(task.pk, task.state, state)
    was = task.state
    rec.status(status, metadata=op.metadata)
    rec.done(delivery=DeliveryState.ACKED)
    if was == TaskState.INPUT_REQUIRED and state != was:
        withdraw_questions(task)
    if op.ask_human and state == TaskState.INPUT_REQUIRED:
        ask_human(task, status, op.priority)
    return {"late": False, "duplicate": False, "state": task.state}


def record_batch(ops: Sequence[Record]) -> list[Any]:
    """Record what agents answered for any number of tasks (call inside a transaction).

    Returns one result per op in order (see each op type), or the `HubError` for an op that
    could not apply (its task does not exist). Ops for the same task apply in order. Every
    answer first meets the policy's content rules (`answer_screened`): it is recorded
    redacted, or a rule that rejects it fails the task instead (a Reply's or a Snapshot's
    result is then the failed task's view; a Report's says the state is failed).
    """
    results: list[Any] = []
    work = UnitOfWork([op.task_id for op in ops])
    screened: list[Record] = []
    for op in ops:
        task = work.tasks.get(op.task_id)
        screened.append(answer_screened(op, task) if task is not None else op)
    for op in screened:
        try:
            results.append(_apply(work, op))
        except HubError as exc:
            results.append(exc)
    work.flush()
    for i, op in enumerate(screened):
        if isinstance(results[i], HubError):
            continue
        if isinstance(op, Snapshot):
            results[i] = task_view(work.tasks[op.task_id], history_length=op.history_length)
        elif isinstance(op, Failure) and isinstance(ops[i], Report):
            results[i] = {"late": False, "duplicate": False, "state": work.tasks[op.task_id].state}
        elif isinstance(op, Failure):
            results[i] = task_view(work.tasks[op.task_id])
    return results


def tasks_record(ops: Sequence[Record]) -> list[Any]:
    """`record_batch` in its own transaction."""
    with transaction.atomic():
        return record_batch(ops)
