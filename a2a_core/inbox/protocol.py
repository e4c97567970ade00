"""The inbox protocol: JSON frames between an inbox agent and the hub.

The same frames travel over the websocket (`/ws/agents/<agent>/`) and the long-poll fallback
(`/inbox/<agent>/`). Every frame is a JSON object with a `type`.

hub -> agent
  hello      {"type": "hello", "agent": "duc", "waiting": 3, "ackSeconds": 30, ...} on connect
  delivery   {"type": "delivery", "deliveryId": 7, "attempt": 1, "from": "alpha",
              "kind": "request", "envelope": {...} | null, "taskId": "..." | null,
              "contextId": "...", "traceId": "...", "deadline": "..." | null, "sentAt": "...",
              "message": {A2A Message, the hub's ids}, "requestMetadata": {...}}:
              `requestMetadata` is the caller's SendMessageRequest.metadata
  canceled   {"type": "canceled", "taskId": "..."}: the caller canceled a task you work on
  ok         {"type": "ok", "ref": ..., ...}: your frame was applied
  error      {"type": "error", "ref": ..., "code": "invalid" | "not_found" |
              "illegal_transition" | ..., "message": "...", "errors": [{"field", "message"}]}

agent -> hub (each may carry a `ref`, echoed in the answer)
  ack        {"type": "ack", "deliveryId": 7} or {"type": "ack", "deliveryIds": [7, 8]}
  status     {"type": "status", "taskId": "...", "state": "working" | "input-required" |
              "completed" | "failed" | "canceled" | "rejected", "text": "...", "parts": [...],
              "messageId": "...", "askHuman": false, "priority": "normal",
              "metadata": {...}, "messageMetadata": {...}}: `text` or
              `parts` is the status message; give a `messageId` and a status sent twice is
              recorded once. `askHuman` with input-required puts the question to the humans
              at the hub (an escalation); their answer arrives as the task's next delivery.
              `metadata` is the status update's (callers see it on the update and in the
              task's metadata), `messageMetadata` the status message's
  artifact   {"type": "artifact", "taskId": "...", "artifactId": "...", "name": "...",
              "parts": [...], "append": false, "lastChunk": false, "metadata": {...}}:
              `metadata` is the artifact's (an appended chunk's adds to it)
  ping       {"type": "ping"}

A frame that does not parse, or that the task cannot take, is answered with an `error` frame
and changes nothing; the connection stays open.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from a2a.types.a2a_pb2 import Part
from django.conf import settings
from google.protobuf.json_format import ParseDict, ParseError
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from a2a_core.asyncdb import db
from a2a_core.errors import FieldProblem, HubError, ValidationFailed, field_problems
from a2a_core.models import Agent
from a2a_core.models.task import new_id
from a2a_core.schemas.a2a import holds_lone_surrogate, holds_nul
from a2a_core.services.inbox import inbox_ack
from a2a_core.services.tasks import Report
from a2a_core.services.writes import record

Reportable = Literal["working", "input-required", "completed", "failed", "canceled", "rejected"]
TaskId = Annotated[str, Field(min_length=1, max_length=64)]
# Delivery ids are the database's 64-bit keys: one out of that range is refused here, before
# it reaches a query it would break for every frame sharing its group commit.
DeliveryId = Annotated[int, Field(ge=1, le=2**63 - 1)]


class _Frame(BaseModel):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)

    ref: str | int | None = None


def _check_parts(parts: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    for i, part in enumerate(parts or []):
        try:
            ParseDict(part, Part())
        except ParseError as exc:
            raise ValueError(f"parts[{i}] is not an A2A Part: {exc}") from None
    return parts


class Ack(_Frame):
    type: Literal["ack"]
    delivery_id: DeliveryId | None = None
    delivery_ids: list[DeliveryId] = Field(default_factory=list, max_length=1000)

    @model_validator(mode="after")
    def _some(self) -> Ack:
        if self.delivery_id is None and not self.delivery_ids:
            raise ValueError("give deliveryId or deliveryIds")
        return self

    @property
    def ids(self) -> list[int]:
        return [*self.delivery_ids, *([self.delivery_id] if self.delivery_id is not None else [])]


class Status(_Frame):
    type: Literal["status"]
    task_id: TaskId
    state: Reportable
    text: str | None = Field(default=None, max_length=100_000)
    parts: list[dict[str, Any]] | None = Field(default=None, min_length=1, max_length=64)
    message_id: str | None = Field(default=None, min_length=1, max_length=128)
    # With input-required: the question is for a human at the hub (an escalation).
    ask_human: bool = False
    priority: Literal["low", "normal", "high", "urgent"] = "normal"
    metadata: dict[str, Any] | None = None
    message_metadata: dict[str, Any] | None = None

    _parts = field_validator("parts")(_check_parts)

    @model_validator(mode="after")
    def _message(self) -> Status:
        if self.text is not None and self.parts is not None:
            raise ValueError("give text or parts, not both")
        if self.message_metadata is not None and self.text is None and self.parts is None:
            raise ValueError("messageMetadata goes with the status message (text or parts)")
        if self.ask_human and (self.state != "input-required" or not (self.text or self.parts)):
            raise ValueError("askHuman goes with state input-required and the question")
        return self

    def wire(self) -> dict[str, Any]:
        status: dict[str, Any] = {"state": "TASK_STATE_" + self.state.upper().replace("-", "_")}
        parts = (
            self.parts
            if self.parts is not None
            else ([{"text": self.text}] if self.text is not None else None)
        )
        if parts is not None:
            status["message"] = {
                "messageId": self.message_id or new_id(),
                "role": "ROLE_AGENT",
                "parts": parts,
            }
            if self.message_metadata:
                status["message"]["metadata"] = self.message_metadata
        return status


class ArtifactChunk(_Frame):
    type: Literal["artifact"]
    task_id: TaskId
    artifact_id: str | None = Field(default=None, min_length=1, max_length=128)
    name: str | None = Field(default=None, max_length=200)
    description: str | None = Field(default=None, max_length=2000)
    parts: list[dict[str, Any]] = Field(min_length=1, max_length=64)
    append: bool = False
    last_chunk: bool = False
    metadata: dict[str, Any] | None = None

    _parts = field_validator("parts")(_check_parts)

    @model_validator(mode="after")
    def _appends_to_one(self) -> ArtifactChunk:
        if self.append and not self.artifact_id:
            raise ValueError("an appended chunk names the artifact it extends (artifactId)")
        return self

    def wire(self) -> dict[str, Any]:
        artifact: dict[str, Any] = {"artifactId": self.artifact_id or new_id(), "parts": self.parts}
        if self.name is not None:
            artifact["name"] = self.name
        if self.description is not None:
            artifact["description"] = self.description
        if self.metadata is not None:
            artifact["metadata"] = self.metadata
        return artifact


class Ping(_Frame):
    type: Literal["ping"]


Frame = Annotated[Ack | Status | ArtifactChunk | Ping, Field(discriminator="type")]
FRAME: TypeAdapter[Ack | Status | ArtifactChunk | Ping] = TypeAdapter(Frame)
FRAME_TYPES = ("ack", "status", "artifact", "ping")


def error_frame(exc: HubError, ref: Any = None) -> dict[str, Any]:
    frame: dict[str, Any] = {"type": "error", "ref": ref, "code": exc.code, "message": exc.message}
    if isinstance(exc, ValidationFailed) and exc.problems:
        frame["errors"] = [p.as_dict() for p in exc.problems]
    if exc.details:
        frame["details"] = exc.details
    return frame


def parse(data: str | bytes | dict[str, Any]) -> Ack | Status | ArtifactChunk | Ping:
    """One frame from the agent, validated; `ValidationFailed` says every problem."""
    if isinstance(data, str | bytes):
        if len(data) > settings.HUB_MAX_BODY_BYTES:
            raise ValidationFailed(
                "frame too large",
                [FieldProblem("", f"a frame may be {settings.HUB_MAX_BODY_BYTES} bytes at most")],
            )
        try:
            data = json.loads(data)
        except (ValueError, RecursionError) as exc:  # not JSON, not UTF-8, nested too deep
            raise ValidationFailed(
                "malformed frame", [FieldProblem("", f"not JSON: {exc}")]
            ) from None
    if not isinstance(data, dict):
        raise ValidationFailed("malformed frame", [FieldProblem("", "a frame is a JSON object")])
    if holds_nul(data):
        raise ValidationFailed(
            "malformed frame", [FieldProblem("", "text and ids may not contain U+0000 (NUL)")]
        )
    if holds_lone_surrogate(data):
        raise ValidationFailed(
            "malformed frame",
            [FieldProblem("", "text and ids must be Unicode: a lone surrogate (\\ud800) is not")],
        )
    if data.get("type") not in FRAME_TYPES:
        raise ValidationFailed(
            "unknown frame type",
            [FieldProblem("type", f"got {data.get('type')!r}; valid: {', '.join(FRAME_TYPES)}")],
        )
    try:
        return FRAME.validate_python(data)
    except ValidationError as exc:
        problems = field_problems(exc.errors(include_url=False), skip=1)
        raise ValidationFailed(f"invalid {data['type']} frame", problems) from None


def ref_of(data: Any) -> Any:
    if isinstance(data, str | bytes):
        try:
            data = json.loads(data)
        except (ValueError, RecursionError):
            return None
    ref = data.get("ref") if isinstance(data, dict) else None
    if isinstance(ref, bool) or not isinstance(ref, str | int) or holds_lone_surrogate(ref):
        return None  # not a ref an answer can carry
    return ref


async def answer(agent: Agent, data: str | bytes | dict[str, Any]) -> dict[str, Any]:
    """Apply one frame from `agent`; return the answer frame."""
    try:
        frame = parse(data)
    except HubError as exc:
        return error_frame(exc, ref_of(data))
    return await apply(agent, frame)


async def apply(agent: Agent, frame: Ack | Status | ArtifactChunk | Ping) -> dict[str, Any]:
    """Apply a parsed frame; return the answer frame (`ok`, `pong` or `error`)."""
    try:
        return await _apply(agent, frame)
    except HubError as exc:
        return error_frame(exc, frame.ref)


async def _apply(agent: Agent, frame: Ack | Status | ArtifactChunk | Ping) -> dict[str, Any]:
    if isinstance(frame, Ping):
        return {"type": "pong", "ref": frame.ref}
    if isinstance(frame, Ack):
        fresh = await db(inbox_ack, agent_id=agent.pk, delivery_ids=frame.ids)
        return {"type": "ok", "ref": frame.ref, "acknowledged": fresh}
    if isinstance(frame, Status):
        report = Report(
            frame.task_id,
            agent.pk,
            status=frame.wire(),
            ask_human=frame.ask_human,
            priority=frame.priority,
            metadata=frame.metadata,
        )
    else:
        report = Report(
            frame.task_id,
            agent.pk,
            artifact=frame.wire(),
            append=frame.append,
            last_chunk=frame.last_chunk,
        )
    result = await record(report)
    return {"type": "ok", "ref": frame.ref, "taskId": frame.task_id, **result}
