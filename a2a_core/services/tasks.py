"""Task lifecycle: the A2A 1.0 state machine, enforced, with every change logged as an event."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from a2a_core.errors import FieldProblem, HubError, IllegalTransition, NotFound, ValidationFailed
from a2a_core.events import event, publish_many_on_commit, publish_traffic_on_commit
from a2a_core.logging import get_logger
from a2a_core.models import (
    ACTIVE_STATES,
    ALLOWED_TRANSITIONS,
    PRIORITY_RANK,
    TERMINAL_STATES,
    Artifact,
    Decision,
    Delivery,
    DeliveryState,
    Direction,
    Escalation,
    EscalationKind,
    EscalationStatus,
    Message,
    Priority,
    Task,
    TaskEvent,
    TaskEventKind,
    TaskState,
)
from a2a_core.models.task import new_id
from a2a_core.schemas.a2a import (
    HUB_METADATA,
    ROLE_FROM_WIRE,
    ROLE_TO_WIRE,
    envelope_part_indexes,
    text_of,
    without_hub_metadata,
)
from a2a_core.services.classify import classify, message_item, message_row
from a2a_core.services.notify import notify_queue
from a2a_core.services.rows import (
    insert_returning_pks,
    insert_values,
    marks,
    select_models,
    update_rows,
    update_values,
)

log = get_logger("tasks")


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


def task_item(task: Task, change: str) -> dict[str, Any]:
    """A task change as the `traffic` event lists it (plain fields only)."""
    item: dict[str, Any] = {
        "type": "task",
        "change": change,
        "task_id": task.pk,
        "context_id": task.context_id,
        "state": task.state,
        "caller_id": task.caller_id,
        "target_id": task.target_id,
        "root_id": task.root_id,
        "seq": task.event_seq,
    }
    if task.updated_at is not None:
        # What the task's row in the live feed shows, besides its agents (see `message_item`).
        item["row"] = {"updated_at": task.updated_at.isoformat(), "reason": task.reason}
    return item


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
            *also_save,
        ]
    )
    publish_task_change(task, "status")


# --- views: a task as A2A shows it ----------------------------------------------------------


def message_view(message: Message, task: Task | None = None) -> dict[str, Any]:
    """A stored message as an A2A Message (ProtoJSON) in the hub's ids."""
    view: dict[str, Any] = {
        "messageId": message.message_id,
        "role": ROLE_TO_WIRE[message.role],
        "parts": message.parts,
    }
    context_id = task.context_id if task else message.context_id
    if context_id:
        view["contextId"] = context_id
    if task is not None:
        view["taskId"] = task.pk
    elif message.task_id:
        view["taskId"] = message.task_id
    if message.metadata:
        view["metadata"] = message.metadata
    if message.extensions:
        view["extensions"] = message.extensions
    if message.reference_task_ids:
        view["referenceTaskIds"] = message.reference_task_ids
    return view


def artifact_view(artifact: Artifact) -> dict[str, Any]:
    view: dict[str, Any] = {"artifactId": artifact.artifact_id, "parts": artifact.parts}
    if artifact.name:
        view["name"] = artifact.name
    if artifact.description:
        view["description"] = artifact.description
    if artifact.metadata:
        view["metadata"] = artifact.metadata
    if artifact.extensions:
        view["extensions"] = artifact.extensions
    return view


def task_view(
    task: Task, *, history_length: int | None = None, include_artifacts: bool = True
) -> dict[str, Any]:
    """The task as an A2A Task (ProtoJSON). `history_length`: None = all, 0 = none, n = last n."""
    view: dict[str, Any] = {
        "id": task.pk,
        "contextId": task.context_id,
        "status": status_payload(task),
    }
    if include_artifacts:
        artifacts = [artifact_view(a) for a in task.artifacts.all()]
        if artifacts:
            view["artifacts"] = artifacts
    if history_length != 0:
        messages = task.messages.exclude(decision=Decision.REJECT).order_by("created_at", "pk")
        current = (task.status_message or {}).get("messageId")
        if task.remote_task_id and current:
            # As the agent's own task shows it: the message of the current status joins the
            # history only once the status moves on (the a2a-sdk's task manager does so).
            messages = messages.exclude(direction=Direction.REPLY, message_id=current)
        if history_length:
            messages = messages.reverse()[:history_length]
            history = [message_view(m, task) for m in reversed(list(messages))]
        else:
            history = [message_view(m, task) for m in messages]
        if history:
            view["history"] = history
    metadata = dict(task.metadata)
    if task.parent_id or task.depth:
        metadata[HUB_METADATA] = {
            "parentTaskId": task.parent_id,
            "rootTaskId": task.root_id,
            "depth": task.depth,
            "traceId": task.trace_id,
        }
    if metadata:
        view["metadata"] = metadata
    return view


# --- recording what an agent reported -----------------------------------------------------

RequestRef = tuple[int, datetime]  # (pk, created_at) of the request message being answered


class _UnitOfWork:
    """Changes to several locked tasks, written together: replies and events in one INSERT
    each, tasks and request messages in one UPDATE each."""

    def __init__(self, task_ids: Sequence[str]) -> None:
        # Rows are locked in id order so two batches never wait on each other in a cycle.
        ids = sorted(set(task_ids))
        self.tasks: dict[str, Task] = {
            t.pk: t
            for t in select_models(
                Task, f"id IN ({marks(len(ids))})", ids, order_by="id", for_update=True
            )
        }
        self.replies: list[tuple[Message, Task]] = []
        # (task, seq, kind, state, payload, created_at) rows for the event log
        self.events: list[tuple[Any, ...]] = []
        self.touched: dict[str, Task] = {}
        # request message pk -> [delivery_state, responded_at, latency_ms]
        self.answers: dict[int, list[Any]] = {}
        self._seen: dict[str, set[str]] = {}

    def recording(self, task_id: str, request: RequestRef | None) -> _Recording:
        task = self.tasks.get(task_id)
        if task is None:
            raise NotFound(f"task {task_id} does not exist")
        return _Recording(self, task, request)

    def seen(self, task: Task) -> set[str]:
        if task.pk not in self._seen:
            # Status updates always come with the replies they carry, so a task without any
            # recorded event has no recorded reply either.
            self._seen[task.pk] = (
                set(
                    task.messages.filter(direction=Direction.REPLY).values_list(
                        "message_id", flat=True
                    )
                )
                if task.event_seq
                else set()
            )
        return self._seen[task.pk]

    def flush(self) -> None:
        items: list[dict[str, Any]] = []
        if self.replies:
            insert_returning_pks([row for row, _ in self.replies])
            items.extend(message_item(row, task) for row, task in self.replies)
        insert_values(TaskEvent, _EVENT_FIELDS, self.events)
        if self.touched:
            update_rows(list(self.touched.values()), _TASK_FIELDS)
            items.extend(task_item(task, "updated") for task in self.touched.values())
        # Rows not answered yet only change their delivery state: an earlier answer time is
        # never overwritten.
        answered = [(pk, row) for pk, row in self.answers.items() if row[1] is not None]
        delivered = [(pk, row[:1]) for pk, row in self.answers.items() if row[1] is None]
        update_values(Message, _ANSWER_FIELDS, answered)
        update_values(Message, _ANSWER_FIELDS[:1], delivered)
        # The request's row in live feeds, drawn before the answer came, shows its latency.
        items.extend(
            {"type": "answered", "message_pk": pk, "latency_ms": row[2]}
            for pk, row in answered
            if row[2] is not None
        )
        publish_traffic_on_commit(items, {t.pk: t.event_seq for t in self.touched.values()})


_EVENT_FIELDS = ["task", "seq", "kind", "state", "payload", "created_at"]
_ANSWER_FIELDS = ["delivery_state", "responded_at", "latency_ms"]
# What the latency column holds (~24.8 days); an answer later than that is stored as this.
MAX_LATENCY_MS = 2**31 - 1
_TASK_FIELDS = [
    "state",
    "status_message",
    "status_timestamp",
    "reason",
    "event_seq",
    "remote_task_id",
    "remote_context_id",
    "deadline",
    "metadata",
    "updated_at",
]


class _Recording:
    """What one agent answer changes on one task, collected in a unit of work."""

    def __init__(self, work: _UnitOfWork, task: Task, request: RequestRef | None) -> None:
        self.work = work
        self.task = task
        self.request = request

    def reply(self, message: dict[str, Any], *, late: bool = False, direct: bool = False) -> bool:
        """Store an agent's message on the task once (agents repeat them in events and
        history); False if it was stored before. `late`: it came after the task's deadline.
        `direct`: it is the agent's whole answer to the request being recorded (a Message,
        no task), which a retry of that request gets back."""
        message_id = str(message.get("messageId") or "")
        seen = self.work.seen(self.task)
        if not message_id or message_id in seen:
            return False
        if ROLE_FROM_WIRE.get(str(message.get("role")), "agent") != "agent":
            return False
        seen.add(message_id)
        task = self.task
        kind, envelope, summary = classify(message, default_kind="response", strict=False)
        row = message_row(
            message,
            role="agent",
            direction=Direction.REPLY,
            task=task,
            kind=kind,
            envelope=envelope,
            summary=summary,
            sender_id=task.target_id,
            target_id=task.caller_id,
            correlation_id=str((envelope or {}).get("correlationId") or "")[:128],
            delivery_state=DeliveryState.DELIVERED,
            late=late,
            in_reply_to_id=self.request[0] if direct and self.request else None,
        )
        self.work.replies.append((row, task))
        return True

    def event(self, kind: str, payload: dict[str, Any], state: str = "") -> None:
        self.task.event_seq += 1
        self.work.events.append(
            (self.task.pk, self.task.event_seq, kind, state, payload, timezone.now())
        )

    def status(self, status: dict[str, Any], *, reason: str = "", metadata: Any = None) -> bool:
        """Apply an agent-reported status; False if it changes nothing or the state machine
        refuses it (the task stays as it was). `metadata`: the status update event's, relayed
        on the recorded event and merged into the task's (as the a2a-sdk's task store does),
        so an update that only carries metadata is recorded too."""
        task = self.task
        try:
            state = state_from_wire(str(status.get("state", "")))
        except ValueError:
            log.warning(
                "agent reported an unknown state", extra={"task_id": task.pk, "status": status}
            )
            return False
        message = status.get("message")
        if isinstance(message, dict):
            self.reply(message)
        metadata = _agent_metadata(metadata)
        if state == task.state and (
            state in TERMINAL_STATES
            or state == TaskState.SUBMITTED
            or not (isinstance(message, dict) or metadata)
        ):
            return False
        try:
            check_transition(task.pk, task.state, state)
        except IllegalTransition as exc:
            log.warning(
                "agent reported an illegal transition",
                extra={"task_id": task.pk, "error": str(exc)},
            )
            return False
        task.state = state
        task.status_message = _hub_ids(message, task) if isinstance(message, dict) else None
        task.status_timestamp = timezone.now()
        if state in TERMINAL_STATES:
            text = text_of(message.get("parts", [])) if isinstance(message, dict) else ""
            task.reason = reason or text
        update = {"taskId": task.pk, "contextId": task.context_id, "status": status_payload(task)}
        if metadata:
            update["metadata"] = metadata
            task.metadata = {**task.metadata, **metadata}
        self.event(TaskEventKind.STATUS, {"statusUpdate": update}, state)
        return True

    def task_metadata(self, remote: dict[str, Any]) -> None:
        """The agent's own view of its task is the task's metadata from now on."""
        self.task.metadata = _agent_metadata(remote.get("metadata"))

    def artifact(
        self, artifact: dict[str, Any], *, append: bool, last_chunk: bool, metadata: Any = None
    ) -> None:
        task = self.task
        artifact_id = str(artifact.get("artifactId") or new_id())
        row = Artifact.objects.filter(task=task, artifact_id=artifact_id).first()
        parts = artifact.get("parts") or []
        if row is None:
            row = Artifact(task=task, artifact_id=artifact_id, parts=[])
        row.parts = [*row.parts, *parts] if append and row.pk else list(parts)
        row.name = artifact.get("name", row.name) or ""
        row.description = artifact.get("description", row.description) or ""
        # A chunk's metadata adds to the artifact's, as the a2a-sdk's task store keeps it.
        chunk_metadata = artifact.get("metadata") or {}
        row.metadata = {**row.metadata, **chunk_metadata} if append and row.pk else chunk_metadata
        row.extensions = artifact.get("extensions", row.extensions) or []
        row.complete = last_chunk or not append
        row.save()
        update: dict[str, Any] = {
            "taskId": task.pk,
            "contextId": task.context_id,
            "artifact": {**artifact, "artifactId": artifact_id},
        }
        if append:
            update["append"] = True
        if last_chunk:
            update["lastChunk"] = True
        if metadata := _agent_metadata(metadata):
            update["metadata"] = metadata
        self.event(TaskEventKind.ARTIFACT, {"artifactUpdate": update})

    def learn_remote_ids(self, remote_task_id: Any, remote_context_id: Any) -> None:
        if remote_task_id and not self.task.remote_task_id:
            self.task.remote_task_id = str(remote_task_id)
        if remote_context_id and not self.task.remote_context_id:
            self.task.remote_context_id = str(remote_context_id)

    def done(
        self, *, delivery: str = DeliveryState.DELIVERED, deadline: datetime | None = None
    ) -> None:
        """Mark the task changed, and its request messages `delivery` (delivered, or failed when
        the hub gave up) and — unless the task is still submitted or working — answered, with
        their latency."""
        task = self.task
        task.updated_at = timezone.now()
        if deadline is not None and task.state not in TERMINAL_STATES:
            task.deadline = deadline
        self.work.touched[task.pk] = task
        answered = task.state not in ACTIVE_STATES
        now = timezone.now()
        pending: list[tuple[int, datetime, str]]
        if self.request is not None:
            pending = [(*self.request, DeliveryState.PENDING)]
        else:
            pending = list(
                task.messages.filter(
                    direction=Direction.REQUEST, responded_at__isnull=True
                ).values_list("pk", "created_at", "delivery_state")
            )
        for pk, created_at, current in pending:
            row = self.work.answers.setdefault(pk, [current, None, None])
            # Delivery states only move forward: a message the agent received stays delivered
            # (or acknowledged) when the hub gives up.
            if _PROGRESS.get(delivery, -1) > _PROGRESS.get(row[0], -1) or (
                row[0] == DeliveryState.PENDING
            ):
                row[0] = delivery
            if answered and row[1] is None:
                row[1] = now
                row[2] = min(MAX_LATENCY_MS, max(0, int((now - created_at).total_seconds() * 1000)))


_PROGRESS: dict[str, int] = {
    DeliveryState.PENDING: 0,
    DeliveryState.QUEUED: 0,
    DeliveryState.DELIVERED: 1,
    DeliveryState.ACKED: 2,
}


def _agent_metadata(metadata: Any) -> dict[str, Any]:
    """An agent's metadata as the hub relays it: untouched, but for the hub's own key, which
    only the hub writes on what it relays."""
    return without_hub_metadata(metadata) if isinstance(metadata, dict) else {}


def _hub_ids(message: dict[str, Any], task: Task) -> dict[str, Any]:
    view = {k: v for k, v in message.items() if k not in ("taskId", "contextId")}
    view["taskId"], view["contextId"] = task.pk, task.context_id
    if "metadata" in view:
        view["metadata"] = without_hub_metadata(view["metadata"])
        if not view["metadata"]:
            del view["metadata"]
    return view


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
    """The hub gives up on a task (agent down, timeout, lost worker, canceled)."""

    task_id: str
    reason: str
    state: str = TaskState.FAILED


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


def _apply(work: _UnitOfWork, op: Record) -> Any:
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
            rec.status(update.get("status") or {}, metadata=update.get("metadata"))
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
        return {k: v for k, v in _hub_ids(op.message, task).items() if k != "taskId"}
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
        task.status_timestamp = timezone.now()
        task.reason = op.reason
        update = {"taskId": task.pk, "contextId": task.context_id, "status": status_payload(task)}
        rec.event(TaskEventKind.STATUS, {"statusUpdate": update}, op.state)
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


def _report(rec: _Recording, op: Report) -> dict[str, Any]:
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
        _ask_human(task, status, op.priority)
    return {"late": False, "duplicate": False, "state": task.state}


def _ask_human(task: Task, status: dict[str, Any], priority: str) -> None:
    """An agent's question for the humans operating the hub: an escalation they answer."""
    message = status.get("message") or {}
    question = text_of(message.get("parts") or [])
    escalation = Escalation.objects.create(
        kind=EscalationKind.INPUT_REQUIRED,
        priority=priority,
        priority_rank=PRIORITY_RANK[Priority(priority)],
        task=task,
        agent_id=task.target_id,
        question=question or "(the agent asked without words; see the task)",
        answer_schema=_answer_schema(message),
        options=_options(_question_payload(message).get("options")),
        deadline=timezone.now() + timedelta(seconds=settings.HUB_QUESTION_DEADLINE_SECONDS),
    )
    announce_escalation(escalation, "escalation.opened")
    notify_queue(escalation=escalation, event="arrived")


def _question_payload(message: dict[str, Any]) -> dict[str, Any]:
    """The payload of the first `question` envelope among the message's parts, or {}."""
    for index in envelope_part_indexes(message):
        envelope = message["parts"][index].get("data")
        if isinstance(envelope, dict) and envelope.get("kind") == "question":
            payload = envelope.get("payload")
            return payload if isinstance(payload, dict) else {}
    return {}


def _options(offered: Any) -> list[str]:
    """The quick replies an agent offered: up to 50 texts of up to 500 characters."""
    if not isinstance(offered, list):
        return []
    return [o[:500] for o in offered if isinstance(o, str) and o.strip()][:50]


def _answer_schema(message: dict[str, Any]) -> dict[str, Any] | None:
    """The `answerSchema` of the message's question envelope: the agent wants structured data
    in the humans' answer."""
    schema = _question_payload(message).get("answerSchema")
    return schema if isinstance(schema, dict) else None


def withdraw_questions(task: Task) -> None:
    """The task moved on: questions to humans still open on it are withdrawn."""
    open_ = Escalation.objects.filter(
        task=task, kind=EscalationKind.INPUT_REQUIRED, status=EscalationStatus.PENDING
    )
    for escalation in open_:
        escalation.status = EscalationStatus.WITHDRAWN
        escalation.decided_at = timezone.now()
        escalation.save(update_fields=["status", "decided_at"])
        announce_escalation(escalation, "escalation.withdrawn")


def announce_escalation(escalation: Escalation, name: str) -> None:
    publish_many_on_commit(
        [
            (
                "escalations",
                event(
                    name,
                    escalation_id=escalation.pk,
                    status=escalation.status,
                    task_id=escalation.task_id,
                    kind=escalation.kind,
                ),
            )
        ]
    )


def record_batch(ops: Sequence[Record]) -> list[Any]:
    """Record what agents answered for any number of tasks (call inside a transaction).

    Returns one result per op in order (see each op type), or the `HubError` for an op that
    could not apply (its task does not exist). Ops for the same task apply in order.
    """
    results: list[Any] = []
    work = _UnitOfWork([op.task_id for op in ops])
    for op in ops:
        try:
            results.append(_apply(work, op))
        except HubError as exc:
            results.append(exc)
    work.flush()
    for i, op in enumerate(ops):
        if isinstance(op, Snapshot) and not isinstance(results[i], HubError):
            results[i] = task_view(work.tasks[op.task_id], history_length=op.history_length)
        elif isinstance(op, Failure) and not isinstance(results[i], HubError):
            results[i] = task_view(work.tasks[op.task_id])
    return results


def tasks_record(ops: Sequence[Record]) -> list[Any]:
    """`record_batch` in its own transaction."""
    with transaction.atomic():
        return record_batch(ops)
