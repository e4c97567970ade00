"""What every A2A call at the hub shares: who calls whom (`Call`), recording through the
group commit (`record`, `fail`, `outcome`), and the wire forms of what is relayed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from a2a.types.a2a_pb2 import Message, SendMessageRequest, StreamResponse, Task
from a2a.utils.errors import A2AError, UnsupportedOperationError
from google.protobuf.json_format import MessageToDict, ParseDict

from a2a_core import tracing
from a2a_core.call_times import CallTimes
from a2a_core.delivery.agent_errors import AgentRefused
from a2a_core.delivery.endpoint import traceparent
from a2a_core.errors import FieldProblem, ValidationFailed
from a2a_core.models import Agent, TaskState
from a2a_core.schemas.a2a import HUB_METADATA
from a2a_core.services.messages import Accepted, Inbound
from a2a_core.services.task_recording import RequestRef
from a2a_core.services.tasks import Failure, Record
from a2a_core.services.writes import Outcome, Write, writes_commit
from a2a_core.storage.batching import Batcher

# Group commit: concurrent calls' writes share transactions (see a2a_core/batching.py).
_writes: Batcher[Write, Any] = Batcher(writes_commit)


async def record(op: Record) -> Any:
    return await _writes.submit(op)


async def accept_inbound(inbound: Inbound) -> Accepted:
    """Commit a message's acceptance (the policy's verdict on it) with the group commit."""
    accepted: Accepted = await _writes.submit(inbound)
    return accepted


async def fail(task_id: str, reason: str, state: str = TaskState.FAILED) -> dict[str, Any]:
    tracing.forwarded(task_id, ok=False, why=reason)
    result: dict[str, Any] = await _writes.submit(Failure(task_id, reason, state))
    return result


async def outcome(agent: Agent, accepted: Accepted, ok: bool) -> None:
    """Tell the agent's breaker how the call went (failures always; successes only when the
    breaker had something to forget)."""
    tracing.forwarded(accepted.task_id, ok=ok)
    if not ok or accepted.watch_breaker:
        await _writes.submit(Outcome(agent.slug, ok))


@dataclass(frozen=True)
class Call:
    """Who calls whom: the authenticated caller and the agent whose endpoint was called
    (None for the hub's own endpoint), with the request's headers (lower-cased names).
    `response_headers` are added to the HTTP response (e.g. Retry-After on a refusal)."""

    caller: Agent
    target: Agent | None
    headers: dict[str, str] = field(default_factory=dict)
    response_headers: dict[str, str] = field(default_factory=dict)
    # What serving the call found out (task_id, skill, trace_id), for its metrics and log.
    learned: dict[str, str] = field(default_factory=dict)
    # When it passed each point of its way (the trace's split of a span's time).
    times: CallTimes = field(default_factory=CallTimes)

    @property
    def agent(self) -> Agent:
        if self.target is None:
            raise UnsupportedOperationError(
                "address an agent: send messages to /a2a/<agent>/, not to the hub itself"
            )
        return self.target


def wire_task(view: dict[str, Any]) -> Task:
    """A task's wire view (`task_view`) as the SDK's Task."""
    return ParseDict(view, Task(), ignore_unknown_fields=True)


def stream_item(payload: dict[str, Any]) -> Any:
    """A recorded stream event as the SDK's item: a task, a message or an update."""
    response = ParseDict(payload, StreamResponse(), ignore_unknown_fields=True)
    return getattr(response, response.WhichOneof("payload") or "task")


def checked_history_length(value: Any, has: bool) -> int | None:
    """A request's historyLength: None when absent; a negative one is a ValidationFailed."""
    if not has:
        return None
    if value < 0:
        raise ValidationFailed(
            "invalid historyLength",
            [FieldProblem("historyLength", f"must be a non-negative integer, got {value}")],
        )
    return int(value)


def forwarded(original: Message, accepted: Accepted) -> Message:
    """The caller's message as it goes on to an endpoint agent: the agent's own task and
    context ids, and the hub's fields under `metadata.a2aHub`."""
    message = Message()
    message.CopyFrom(original)
    message.task_id = accepted.remote_task_id
    message.context_id = accepted.remote_context_id
    message.metadata.update({HUB_METADATA: accepted.hub_fields})
    return message


def forwarded_metadata(metadata: dict[str, Any], accepted: Accepted) -> dict[str, Any]:
    """The caller's request metadata as it goes on to an endpoint agent: as the caller sent
    it, but for the hub's key, which carries the hub's fields there too."""
    if HUB_METADATA in metadata:
        return {**metadata, HUB_METADATA: accepted.hub_fields}
    return metadata


def request_metadata(request: SendMessageRequest) -> dict[str, Any]:
    return MessageToDict(request.metadata) if request.HasField("metadata") else {}


def forward_headers(call: Call, target: Agent, accepted: Accepted) -> dict[str, str]:
    return {
        "traceparent": tracing.forward(target, accepted) or traceparent(accepted.trace_id),
        "A2A-Hub-Task-Id": accepted.task_id,
        "A2A-Hub-Caller": call.caller.slug,
    }


def message_ref(accepted: Accepted, times: CallTimes | None = None) -> RequestRef:
    """The accepted request's (pk, created_at, the call's times): what a recorded answer
    replies to."""
    if times is not None:
        times.judged = times.judged or accepted.judged_ns
    return accepted.message_pk, accepted.message_created_at, times


def relayed_refusal(agent: Agent, exc: AgentRefused) -> A2AError:
    """An agent's A2A error as the caller gets it: the same error, in the agent's name."""
    error = exc.error
    return type(error)(f"{agent.slug}: {error.message}", data=error.data)


# What an endpoint agent's task may still be when its answer or stream ends: then the hub
# follows it to its end.
UNFINISHED = frozenset({"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"})
