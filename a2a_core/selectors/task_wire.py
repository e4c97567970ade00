"""A stored task, message or artifact as A2A shows it (ProtoJSON, the hub's ids)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from a2a_core.models import (
    TASK_STATES,
    Artifact,
    Decision,
    Direction,
    Message,
    Task,
)
from a2a_core.schemas.a2a import (
    HUB_METADATA,
    ROLE_TO_WIRE,
)


def wire_state(state: str) -> str:
    """`input-required` -> `TASK_STATE_INPUT_REQUIRED`."""
    return "TASK_STATE_" + state.upper().replace("-", "_")


def state_from_wire(value: str) -> str:
    """`TASK_STATE_INPUT_REQUIRED` (or `input-required`) -> `input-required`."""
    name = value.removeprefix("TASK_STATE_").lower().replace("_", "-")
    if name not in TASK_STATES:
        raise ValueError(f"unknown task state {value!r}")
    return name


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


def status_update(task: Task, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    """The task's current status as the event its log records and streams relay: a
    StreamResponse with a TaskStatusUpdateEvent (ProtoJSON), with the agent's `metadata`."""
    update: dict[str, Any] = {
        "taskId": task.pk,
        "contextId": task.context_id,
        "status": status_payload(task),
    }
    if metadata:
        update["metadata"] = metadata
    return {"statusUpdate": update}


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
