"""GetTask, ListTasks and CancelTask: a task as the caller may see it, and its cancel."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    ListTasksResponse,
    Task,
)
from a2a.types.a2a_pb2 import TaskState as WireState
from a2a.utils.errors import TaskNotCancelableError
from google.protobuf.json_format import ParseDict

from a2a_core import selectors
from a2a_core.asyncdb import db
from a2a_core.delivery.agent_errors import AgentRefused, AgentTimeout
from a2a_core.delivery.call import Call
from a2a_core.delivery.endpoint import forwarder
from a2a_core.delivery.wire import checked_history_length, relayed_refusal, wire_task
from a2a_core.errors import FieldProblem, TargetUnavailable, ValidationFailed
from a2a_core.models import TERMINAL_STATES, Agent, DeliveryMode, TaskState
from a2a_core.selectors.task_wire import state_from_wire, task_view
from a2a_core.services.inbox import inbox_task_canceled
from a2a_core.services.tasks import Snapshot
from a2a_core.services.writes import record, record_failure
from a2a_core.traceparent import header as traceparent

MAX_PAGE_SIZE = 100


async def get_task(call: Call, request: GetTaskRequest) -> Task:
    history_length = checked_history_length(
        request.history_length, request.HasField("history_length")
    )

    def read() -> dict[str, Any]:
        task = selectors.task_visible(task_id=request.id, agent=call.caller, target=call.target)
        return task_view(task, history_length=history_length)

    return wire_task(await db(read))


@dataclass(frozen=True)
class _ListParams:
    page_size: int
    history_length: int | None
    state: str
    updated_after: datetime | None
    include_artifacts: bool


def _list_params(request: ListTasksRequest) -> _ListParams:
    """ListTasks' parameters, checked: every problem found is in one ValidationFailed."""
    problems = []
    page_size = request.page_size if request.HasField("page_size") else 50
    if not 1 <= page_size <= MAX_PAGE_SIZE:
        problems.append(
            FieldProblem(
                "pageSize", f"must be between 1 and {MAX_PAGE_SIZE} inclusive, got {page_size}"
            )
        )
    history_length = None
    try:
        history_length = checked_history_length(
            request.history_length, request.HasField("history_length")
        )
    except ValidationFailed as exc:
        problems.extend(exc.problems)
    state = ""
    if request.status:
        state = state_from_wire(WireState.Name(request.status))
    if problems:
        raise ValidationFailed("invalid ListTasks parameters", problems)
    return _ListParams(
        page_size=page_size,
        history_length=history_length,
        state=state,
        updated_after=request.status_timestamp_after.ToDatetime(tzinfo=UTC)
        if request.HasField("status_timestamp_after")
        else None,
        include_artifacts=request.include_artifacts
        if request.HasField("include_artifacts")
        else False,
    )


async def list_tasks(call: Call, request: ListTasksRequest) -> ListTasksResponse:
    params = _list_params(request)

    def read() -> dict[str, Any]:
        page = selectors.task_list(
            agent=call.caller,
            target=call.target,
            context_id=request.context_id,
            state=params.state,
            updated_after=params.updated_after,
            page_size=params.page_size,
            page_token=request.page_token,
        )
        return {
            "tasks": [
                task_view(
                    t,
                    history_length=params.history_length,
                    include_artifacts=params.include_artifacts,
                )
                for t in page.tasks
            ],
            "nextPageToken": page.next_page_token,
            "pageSize": params.page_size,
            "totalSize": page.total_size,
        }

    return ParseDict(await db(read), ListTasksResponse(), ignore_unknown_fields=True)


async def cancel_task(call: Call, request: CancelTaskRequest) -> Task:
    task = await db(
        selectors.task_visible, task_id=request.id, agent=call.caller, target=call.target
    )
    if task.state in TERMINAL_STATES:
        raise TaskNotCancelableError(f"task {task.pk} is already {task.state}")
    target: Agent = await db(lambda: task.target)
    reason = f"canceled by {call.caller.slug}"
    if target.delivery_mode == DeliveryMode.ENDPOINT and task.remote_task_id:
        try:
            remote = await forwarder().cancel(
                target,
                task.remote_task_id,
                headers={"traceparent": traceparent(task.trace_id), "A2A-Hub-Task-Id": task.pk},
                wait_seconds=10.0,
            )
        except AgentRefused as exc:
            if isinstance(exc.error, TaskNotCancelableError):
                raise TaskNotCancelableError(f"{target.slug}: {exc.error.message}") from None
            raise relayed_refusal(target, exc) from None
        except (AgentTimeout, TargetUnavailable) as exc:
            reason = f"canceled at the hub by {call.caller.slug}; {target.slug} {exc.message}"
        else:
            view = await record(Snapshot(task.pk, remote))
            if view["status"]["state"] == "TASK_STATE_CANCELED":
                return wire_task(view)
    canceled = wire_task(await record_failure(task.pk, reason, TaskState.CANCELED))
    # A call still waiting for one of the agent's slots (in this process) is not sent at all.
    forwarder().slots.withdraw(task.pk)
    if target.delivery_mode == DeliveryMode.INBOX:
        await db(inbox_task_canceled, agent_id=target.pk, task_id=task.pk)
    return canceled
