"""The task a message goes to: the one it continues, or a new one, maybe a child of the task
the caller works on."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, NamedTuple

from a2a_core.errors import FieldProblem, IllegalTransition, NotFound, ValidationFailed
from a2a_core.models import TERMINAL_STATES, Agent, Task, TaskState
from a2a_core.models.task import new_id
from a2a_core.schemas.a2a import HUB_METADATA
from a2a_core.storage.rows import new_row
from a2a_core.traceparent import trace_id_of


class Placed(NamedTuple):
    """Where a message goes: its task (a new one is not saved yet), whether it is new, and
    the context id the target agent knows the conversation by."""

    task: Task
    created: bool
    remote_context_id: str


def _parent(parent_id: str, caller: Agent) -> Task | None:
    if not parent_id:
        return None
    parent = Task.objects.filter(pk=parent_id).first()
    if parent is None or parent.target_id != caller.pk:
        raise ValidationFailed(
            "invalid delegation",
            [
                FieldProblem(
                    f"metadata.{HUB_METADATA}.parentTaskId",
                    f"task {parent_id} is not a task {caller.slug} is working on",
                )
            ],
        )
    return parent


def _remote_context(context_id: str, target: Agent) -> str:
    """The context id the target agent knows this conversation by (usually the same)."""
    known = (
        Task.objects.filter(context_id=context_id, target=target)
        .exclude(remote_context_id="")
        .order_by("-created_at")
        .values_list("remote_context_id", flat=True)
        .first()
    )
    return known or context_id


def _continued_task(message: dict[str, Any], caller: Agent, target: Agent) -> Task:
    task_id = str(message["taskId"])
    task = Task.objects.select_for_update().filter(pk=task_id, addressed_to=target).first()
    if task is None or task.caller_id != caller.pk:
        raise NotFound(f"task {task_id} not found")
    context_id = message.get("contextId")
    if context_id and context_id != task.context_id:
        raise ValidationFailed(
            "contextId does not match the task",
            [
                FieldProblem(
                    "message.contextId",
                    f"{context_id!r} is not the context of task {task.pk} ({task.context_id!r})",
                )
            ],
        )
    if task.state in TERMINAL_STATES:
        raise IllegalTransition(
            f"task {task.pk} is {task.state}; a task in a terminal state accepts no more messages",
            details={"taskId": task.pk, "state": task.state},
        )
    return task


def _skill(hub: dict[str, Any], target: Agent) -> str:
    if skill := hub.get("skill"):
        return str(skill)[:200]
    skills = getattr(target, "skill_ids", None)
    if skills is None:
        skills = list(target.skills.values_list("skill_id", flat=True)[:2])
    return skills[0] if len(skills) == 1 else ""


def message_place(
    *,
    caller: Agent,
    target: Agent,
    message: dict[str, Any],
    hub: dict[str, Any],
    parent_hint: str,
    traceparent: str,
    now: datetime,
    timeout: float,
    peer_chain: tuple[str, ...] = (),
) -> Placed:
    """The task a message goes to: the one it continues, or a new one (not saved yet).
    `hub` is the message's `metadata.a2aHub`; `parent_hint` the `A2A-Hub-Parent-Task`
    header, used when `hub` names no parentTaskId. A new task without a parent starts with
    `peer_chain`, a trusted peer hub's chain, in place of its caller (its depth counts it)."""
    if message.get("taskId"):
        task = _continued_task(message, caller, target)
        task.deadline = now + timedelta(seconds=timeout)
        return Placed(task, False, task.remote_context_id or task.context_id)
    parent = _parent(str(hub.get("parentTaskId") or parent_hint or ""), caller)
    context_id = str(message.get("contextId") or new_id())
    remote_context_id = (
        _remote_context(context_id, target) if message.get("contextId") else context_id
    )
    task = new_row(
        Task,
        context_id=context_id,
        state=TaskState.SUBMITTED,
        status_timestamp=now,
        caller=caller,
        target=target,
        addressed_to=target,
        skill=_skill(hub, target),
        parent=parent,
        root_id=(parent.root_id or parent.pk) if parent else None,
        depth=parent.depth + 1 if parent else max(len(peer_chain) - 1, 0),
        path=[*(parent.path if parent else (peer_chain or [caller.slug])), target.slug],
        trace_id=(parent.trace_id if parent else "")
        or trace_id_of(traceparent)
        or new_id().replace("-", ""),
        deadline=now + timedelta(seconds=timeout),
    )
    return Placed(task, True, remote_context_id)
