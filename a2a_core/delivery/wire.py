"""The wire forms of what the hub relays: the caller's message as it goes on to an agent, what
SendMessage answers (`Answer`), and the SDK's types of what the hub recorded (tasks, stream
items), as the bindings send them. Each is ProtoJSON exactly as protobuf would write it
(`a2a_core.schemas.protojson`), made without protobuf when the content is plain."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from a2a.types.a2a_pb2 import Message, StreamResponse, Task
from a2a.utils.errors import A2AError
from google.protobuf.json_format import ParseDict

from a2a_core import tracing
from a2a_core.call_times import CallTimes
from a2a_core.delivery.agent_errors import AgentRefused
from a2a_core.delivery.call import Call, MessageSend
from a2a_core.errors import FieldProblem, ValidationFailed
from a2a_core.federation import HEADER as CHAIN_HEADER
from a2a_core.federation import chain_header
from a2a_core.models import Agent
from a2a_core.schemas.a2a import HUB_METADATA
from a2a_core.schemas.protojson import normalized
from a2a_core.services.accepted import Accepted
from a2a_core.services.task_recording import RequestRef
from a2a_core.traceparent import header as traceparent


def wire_task(view: dict[str, Any]) -> Task:
    """A task's wire view (`task_view`) as the SDK's Task."""
    return ParseDict(view, Task(), ignore_unknown_fields=True)


@dataclass
class Answer:
    """What SendMessage answers: a task or a message (`kind`), from its ProtoJSON `data`
    (a task's wire view, a message). The JSON-RPC relay sends `response()`, `data` as
    protobuf would write it (`normalized`, without protobuf when plain); the SDK's servers
    (REST, gRPC, the JSON-RPC dispatcher) get `proto()`, parsed from `data` once, as before."""

    kind: str  # "task" or "message"
    data: dict[str, Any]
    ignore_unknown_fields: bool = True

    def proto(self) -> Task | Message:
        made = Task() if self.kind == "task" else Message()
        return ParseDict(self.data, made, ignore_unknown_fields=self.ignore_unknown_fields)

    def response(self) -> dict[str, Any]:
        """As `MessageToDict(SendMessageResponse(...))` writes it."""
        kind = Task if self.kind == "task" else Message
        body = normalized(self.data, kind, ignore_unknown_fields=self.ignore_unknown_fields)
        return {self.kind: body}

    @property
    def status(self) -> str:
        """The call's status label: `message`, or the task's state (`completed`...)."""
        if self.kind == "message":
            return "message"
        state = (self.data.get("status") or {}).get("state") or "TASK_STATE_UNSPECIFIED"
        return str(state).removeprefix("TASK_STATE_").lower()


def task_answer(view: dict[str, Any]) -> Answer:
    """A task's wire view (`task_view`) as SendMessage answers it."""
    return Answer("task", view)


def message_answer(message: dict[str, Any], *, ignore_unknown_fields: bool = True) -> Answer:
    return Answer("message", message, ignore_unknown_fields)


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


def forwarded(original: dict[str, Any], accepted: Accepted) -> dict[str, Any]:
    """The caller's message (ProtoJSON) as it goes on to an endpoint agent: the agent's own
    task and context ids, and the hub's fields under `metadata.a2aHub`; with its parts as the
    content rules redacted them, if they did."""
    message = {**original, "metadata": {**(original.get("metadata") or {})}}
    message["metadata"][HUB_METADATA] = accepted.hub_fields
    if accepted.redacted_parts is not None:
        message["parts"] = accepted.redacted_parts
    for key, value in (
        ("taskId", accepted.remote_task_id),
        ("contextId", accepted.remote_context_id),
    ):
        if value:
            message[key] = value
        else:
            message.pop(key, None)
    return normalized(message, Message)


def forwarded_metadata(metadata: dict[str, Any], accepted: Accepted) -> dict[str, Any]:
    """The caller's request metadata as it goes on to an endpoint agent: as the caller sent
    it, but for the hub's key, which carries the hub's fields there too."""
    if HUB_METADATA in metadata:
        return {**metadata, HUB_METADATA: accepted.hub_fields}
    return metadata


def wants_receipt(request: MessageSend) -> bool:
    """Whether the caller asked for a receipt of its call's decision: `a2aHub.receipt` is
    JSON `true` in the request's metadata or its message's (anything else: no receipt)."""
    for metadata in (request.metadata, request.message.get("metadata") or {}):
        hub = metadata.get(HUB_METADATA) if isinstance(metadata, dict) else None
        if isinstance(hub, dict) and hub.get("receipt") is True:
            return True
    return False


def forward_headers(call: Call, target: Agent, accepted: Accepted) -> dict[str, str]:
    headers = {
        "traceparent": tracing.forward(target, accepted) or traceparent(accepted.trace_id),
        "A2A-Hub-Task-Id": accepted.task_id,
        "A2A-Hub-Caller": call.caller.slug,
    }
    if chain := chain_header(accepted.path):
        headers[CHAIN_HEADER] = chain
    return headers


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
