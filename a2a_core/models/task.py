"""A2A tasks as the hub stores them: the task, its ordered event log and its artifacts."""

from __future__ import annotations

import os
import time
import uuid

from django.db import models

from .agent import Agent


class TaskState(models.TextChoices):
    """The A2A 1.0 task states (the wire names are `TASK_STATE_<NAME>`)."""

    SUBMITTED = "submitted", "Submitted"
    WORKING = "working", "Working"
    INPUT_REQUIRED = "input-required", "Input required"
    AUTH_REQUIRED = "auth-required", "Auth required"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"
    CANCELED = "canceled", "Canceled"
    REJECTED = "rejected", "Rejected"


# Every state's value, to test a string against (`TaskState.values` builds a new list each time).
TASK_STATES = frozenset(TaskState.values)
TERMINAL_STATES = frozenset(
    {TaskState.COMPLETED, TaskState.FAILED, TaskState.CANCELED, TaskState.REJECTED}
)
INTERRUPTED_STATES = frozenset({TaskState.INPUT_REQUIRED, TaskState.AUTH_REQUIRED})
ACTIVE_STATES = frozenset({TaskState.SUBMITTED, TaskState.WORKING})
# In a fixed order, so a query's `state IN (...)` matches the partial index's condition.
ACTIVE_STATE_LIST = sorted(ACTIVE_STATES)

_ENDINGS = {TaskState.COMPLETED, TaskState.FAILED, TaskState.CANCELED, TaskState.REJECTED}

# Nothing returns to `submitted`, nothing leaves a terminal state, and an interrupted task
# resumes through `working` (a human answer or a new message) rather than jumping between the
# two interrupted states.
ALLOWED_TRANSITIONS: dict[str, frozenset[str]] = {
    TaskState.SUBMITTED: frozenset(
        {TaskState.WORKING, TaskState.INPUT_REQUIRED, TaskState.AUTH_REQUIRED, *_ENDINGS}
    ),
    TaskState.WORKING: frozenset(
        {TaskState.WORKING, TaskState.INPUT_REQUIRED, TaskState.AUTH_REQUIRED, *_ENDINGS}
    ),
    TaskState.INPUT_REQUIRED: frozenset({TaskState.WORKING, TaskState.INPUT_REQUIRED, *_ENDINGS}),
    TaskState.AUTH_REQUIRED: frozenset({TaskState.WORKING, TaskState.AUTH_REQUIRED, *_ENDINGS}),
    TaskState.COMPLETED: frozenset(),
    TaskState.FAILED: frozenset(),
    TaskState.CANCELED: frozenset(),
    TaskState.REJECTED: frozenset(),
}


def new_id() -> str:
    """A new UUIDv7 (RFC 9562): the creation time in milliseconds, then 74 random bits.

    Ids that grow with time are added at the end of the indexes holding them (tasks by id,
    context, root; events by task) instead of at random places: a commit touches a few
    pages at the right edge of each index, not a page anywhere in it."""
    value = (time.time_ns() // 1_000_000) << 80 | int.from_bytes(os.urandom(10)) & _RANDOM_BITS
    return str(uuid.UUID(int=value | _VERSION_7))


_RANDOM_BITS = ~(0xF << 76 | 0x3 << 62) & ((1 << 80) - 1)  # room for the version and variant
_VERSION_7 = 0x7 << 76 | 0x2 << 62  # version 7, RFC 9562 variant


class Task(models.Model):
    id = models.CharField(primary_key=True, max_length=64, default=new_id, editable=False)
    context_id = models.CharField(max_length=128, db_index=True)
    state = models.CharField(max_length=16, choices=TaskState, default=TaskState.SUBMITTED)
    # The A2A Message attached to the current status (ProtoJSON), if any.
    status_message = models.JSONField(null=True, blank=True)
    status_timestamp = models.DateTimeField()
    metadata = models.JSONField(default=dict, blank=True)

    # Foreign keys without their own index are covered by the composite indexes below.
    caller = models.ForeignKey(
        Agent,
        on_delete=models.PROTECT,
        related_name="tasks_called",
        null=True,
        blank=True,
        db_index=False,
    )
    target = models.ForeignKey(
        Agent, on_delete=models.PROTECT, related_name="tasks_received", db_index=False
    )
    # The agent the caller addressed; differs from `target` when the policy redirected it.
    addressed_to = models.ForeignKey(
        Agent,
        on_delete=models.PROTECT,
        related_name="tasks_addressed",
        null=True,
        blank=True,
        db_index=False,
    )
    skill = models.CharField(max_length=200, blank=True)

    # Delegation chain: a call made while working on a task becomes its child.
    parent = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="children"
    )
    root = models.ForeignKey(
        "self",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="descendants",
        db_index=False,
    )
    depth = models.PositiveSmallIntegerField(default=0)
    trace_id = models.CharField(max_length=32, db_index=True)
    deadline = models.DateTimeField(null=True, blank=True)

    # For endpoint agents: the ids the agent's own server gave this task.
    remote_task_id = models.CharField(max_length=128, blank=True)
    remote_context_id = models.CharField(max_length=128, blank=True)

    # Agents on the delegation chain, root caller first, this task's target last.
    path = models.JSONField(default=list)
    # Why the task ended, in words a human can act on (failed/canceled/rejected).
    reason = models.TextField(blank=True)
    # Monotonic counter of the task's events; subscribers resume from it without gaps.
    event_seq = models.PositiveIntegerField(default=0)

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-status_timestamp"]
        indexes = [
            models.Index(fields=["caller", "-status_timestamp"], name="task_caller_ts"),
            models.Index(fields=["target", "-status_timestamp"], name="task_target_ts"),
            models.Index(fields=["state", "-status_timestamp"], name="task_state_ts"),
            models.Index(fields=["root"], name="task_root"),
            # Tasks in flight per caller (the concurrency limit, counted in every group
            # commit that accepts calls): only tasks in flight are in it, so the count reads
            # those, however many a caller has finished (see `storage.reads.count_by`).
            models.Index(
                fields=["caller"],
                condition=models.Q(state__in=ACTIVE_STATE_LIST),
                name="task_inflight",
            ),
            models.Index(fields=["-status_timestamp", "id"], name="task_ts_id"),
            # The trace list: root tasks (depth 0), newest first (`a2a_core.selectors.
            # trace_list`). Not `root IS NULL`: the planner would take the root index for it.
            models.Index(
                fields=["-created_at", "-id"],
                condition=models.Q(depth=0),
                name="task_roots",
            ),
        ]

    def __str__(self) -> str:
        return self.id

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    @property
    def wire_state(self) -> str:
        return "TASK_STATE_" + self.state.upper().replace("-", "_")


class TaskEventKind(models.TextChoices):
    STATUS = "status", "Status update"
    ARTIFACT = "artifact", "Artifact update"
    MESSAGE = "message", "Message"


class TaskEvent(models.Model):
    """The ordered log of everything that happened to a task, as it crossed the hub."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="events", db_index=False)
    seq = models.PositiveIntegerField()
    kind = models.CharField(max_length=16, choices=TaskEventKind)
    state = models.CharField(max_length=16, choices=TaskState, blank=True)
    # The StreamResponse payload in the hub's ids (ProtoJSON).
    payload = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["task", "seq"]
        constraints = [models.UniqueConstraint(fields=["task", "seq"], name="task_event_seq")]

    def __str__(self) -> str:
        return f"{self.task_id}#{self.seq}"


class Artifact(models.Model):
    task = models.ForeignKey(
        Task, on_delete=models.CASCADE, related_name="artifacts", db_index=False
    )
    artifact_id = models.CharField(max_length=128)
    name = models.CharField(max_length=500, blank=True)
    description = models.TextField(blank=True)
    parts = models.JSONField(default=list)
    metadata = models.JSONField(default=dict, blank=True)
    extensions = models.JSONField(default=list, blank=True)
    # False while an agent is still streaming chunks into it (`append` without `lastChunk`).
    complete = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["task", "created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["task", "artifact_id"], name="artifact_unique")
        ]

    def __str__(self) -> str:
        return f"{self.task_id}/{self.artifact_id}"
