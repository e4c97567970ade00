"""What one batch of agent answers changes on its tasks, collected and written together
(`UnitOfWork`), one task at a time (`Recording`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.utils import timezone

from a2a_core.call_times import CallTimes
from a2a_core.errors import IllegalTransition, NotFound
from a2a_core.events import publish_traffic_on_commit
from a2a_core.logging import get_logger
from a2a_core.models import (
    ACTIVE_STATES,
    TERMINAL_STATES,
    Artifact,
    DeliveryState,
    Direction,
    Message,
    Task,
    TaskEvent,
    TaskEventKind,
    TaskState,
)
from a2a_core.models.task import new_id
from a2a_core.schemas.a2a import (
    ROLE_FROM_WIRE,
    text_of,
    without_hub_metadata,
)
from a2a_core.schemas.events import AnsweredItem, TrafficItem
from a2a_core.selectors.task_wire import state_from_wire, status_update
from a2a_core.services.classify import classify, message_item, message_row
from a2a_core.services.task_states import check_transition, task_item
from a2a_core.storage.reads import models_by_pk
from a2a_core.storage.rows import (
    insert_returning_pks,
    insert_values,
    update_rows,
    update_values,
    written_together,
)

log = get_logger("tasks")


# (pk, created_at) of the request message being answered, and (when that call measured
# them) the times of the call that carried it
RequestRef = tuple[int, datetime] | tuple[int, datetime, CallTimes | None]


class UnitOfWork:
    """Changes to several locked tasks, written together: replies and events in one INSERT
    each, tasks and request messages in one UPDATE each."""

    def __init__(self, task_ids: Sequence[str]) -> None:
        # Rows are locked in id order so two batches never wait on each other in a cycle.
        self.tasks: dict[str, Task] = models_by_pk(Task, task_ids, for_update=True)
        self.replies: list[tuple[Message, Task]] = []
        # (task, seq, kind, state, payload, created_at) rows for the event log
        self.events: list[tuple[Any, ...]] = []
        self.touched: dict[str, Task] = {}
        # request message pk -> [delivery_state, responded_at, latency_ms, call_times]
        self.answers: dict[int, list[Any]] = {}
        self._seen: dict[str, set[str]] = {}

    def recording(self, task_id: str, request: RequestRef | None) -> Recording:
        task = self.tasks.get(task_id)
        if task is None:
            raise NotFound(f"task {task_id} does not exist")
        return Recording(self, task, request)

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
        items: list[TrafficItem] = []
        # Rows not answered yet only change their delivery state: an earlier answer time is
        # never overwritten.
        answered = [(pk, row) for pk, row in self.answers.items() if row[1] is not None]
        delivered = [(pk, row[:1]) for pk, row in self.answers.items() if row[1] is None]
        with written_together():
            insert_values(TaskEvent, _EVENT_FIELDS, self.events)
            update_rows(list(self.touched.values()), _TASK_FIELDS)
            update_values(Message, _ANSWER_FIELDS, answered)
            update_values(Message, _ANSWER_FIELDS[:1], delivered)
            insert_returning_pks([row for row, _ in self.replies])
        items.extend(message_item(row, task) for row, task in self.replies)
        items.extend(task_item(task, "updated") for task in self.touched.values())
        # The request's row in live feeds, drawn before the answer came, shows its latency.
        items.extend(
            AnsweredItem(message_pk=pk, latency_ms=row[2])
            for pk, row in answered
            if row[2] is not None
        )
        publish_traffic_on_commit(items, {t.pk: t.event_seq for t in self.touched.values()})


_EVENT_FIELDS = ["task", "seq", "kind", "state", "payload", "created_at"]
_ANSWER_FIELDS = ["delivery_state", "responded_at", "latency_ms", "call_times"]
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


class Recording:
    """What one agent answer changes on one task, collected in a unit of work."""

    def __init__(self, work: UnitOfWork, task: Task, request: RequestRef | None) -> None:
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

    def status(
        self,
        status: dict[str, Any],
        *,
        reason: str = "",
        metadata: Any = None,
        streamed: bool = False,
    ) -> bool:
        """Apply an agent-reported status; False if it changes nothing or the state machine
        refuses it (the task stays as it was). `metadata`: the status update event's, relayed
        on the recorded event and merged into the task's (as the a2a-sdk's task store does),
        so an update that only carries metadata is recorded too. `streamed`: a status update
        event the agent streamed; its SUBMITTED while the hub's task is still submitted is
        recorded as an event all the same, so streams relay it as the agent sent it (a state
        the hub's task has already, because a human approved it, is not repeated)."""
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
        if state == TaskState.SUBMITTED and task.state not in TERMINAL_STATES:
            # Where each of the agent's tasks begins: nothing new for the hub, whose task may
            # be further on already (a held message approved is working when it is delivered).
            if streamed and task.state == TaskState.SUBMITTED:
                self.event(TaskEventKind.STATUS, status_update(task), state)
            return False
        if state == task.state and (
            state in TERMINAL_STATES or not (isinstance(message, dict) or metadata)
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
        task.status_message = hub_ids(message, task) if isinstance(message, dict) else None
        task.status_timestamp = timezone.now()
        if state in TERMINAL_STATES:
            text = text_of(message.get("parts", [])) if isinstance(message, dict) else ""
            task.reason = reason or text
        if metadata:
            task.metadata = {**task.metadata, **metadata}
        self.event(TaskEventKind.STATUS, status_update(task, metadata), state)
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
        times = None
        if self.request is not None:
            pk, created_at = self.request[0], self.request[1]
            times = self.request[2] if len(self.request) > 2 else None
            pending = [(pk, created_at, DeliveryState.PENDING)]
        else:
            pending = list(
                task.messages.filter(
                    direction=Direction.REQUEST, responded_at__isnull=True
                ).values_list("pk", "created_at", "delivery_state")
            )
        for pk, created_at, current in pending:
            row = self.work.answers.setdefault(pk, [current, None, None, None])
            # Delivery states only move forward: a message the agent received stays delivered
            # (or acknowledged) when the hub gives up.
            if _PROGRESS.get(delivery, -1) > _PROGRESS.get(row[0], -1) or (
                row[0] == DeliveryState.PENDING
            ):
                row[0] = delivery
            if answered and row[1] is None:
                row[1] = now
                row[2] = min(MAX_LATENCY_MS, max(0, int((now - created_at).total_seconds() * 1000)))
                row[3] = times.offsets(created_at, now) if times is not None else None


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


def hub_ids(message: dict[str, Any], task: Task) -> dict[str, Any]:
    view = {k: v for k, v in message.items() if k not in ("taskId", "contextId")}
    view["taskId"], view["contextId"] = task.pk, task.context_id
    if "metadata" in view:
        view["metadata"] = without_hub_metadata(view["metadata"])
        if not view["metadata"]:
            del view["metadata"]
    return view
