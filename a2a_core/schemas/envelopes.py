"""Typed message envelopes: the hub's A2A extension for structured agent-to-agent messages.

An agent that wants structure puts one envelope in a `data` Part and lists `ENVELOPE_EXTENSION`
in `Message.extensions`. Plain text messages stay valid: they are a generic `request`.

The envelope is one pydantic discriminated union on `kind`. Field names are camelCase on the
wire. Validation is strict (unknown fields are refused, so a typo is an error, not silence)
and every error names the field path and what was wrong.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from a2a_core.errors import FieldProblem, ValidationFailed
from a2a_core.schemas.envelope_payloads import (
    BroadcastPayload,
    CompletionNoticePayload,
    EscalationPayload,
    KnowledgeSharePayload,
    NotificationPayload,
    Priority,
    QuestionPayload,
    RequestPayload,
    ResponsePayload,
    ReviewRequestPayload,
    ReviewResponsePayload,
    Slug,
    StatusUpdatePayload,
    Strict,
    TaskRequestPayload,
    TaskResponsePayload,
    conditional,
)

ENVELOPE_EXTENSION = "https://a2a-hub.dev/extensions/envelope/v1"
ENVELOPE_MEDIA_TYPE = "application/vnd.a2a-hub.envelope+json"


# --- envelopes ----------------------------------------------------------------------------------


class AgentRef(Strict):
    agent_id: Slug
    role: str | None = None


def _agent_ref(value: Any) -> Any:
    return {"agentId": value} if isinstance(value, str) else value


class EnvelopeBase(Strict):
    priority: Priority = "normal"
    correlation_id: Annotated[str, Field(max_length=128)] | None = None
    from_: AgentRef | None = Field(default=None, alias="from")
    to: AgentRef | list[AgentRef] | None = None
    expects_response: bool = False
    deadline: datetime | None = None
    timestamp: datetime | None = None
    # Set by the hub on the way through; whatever a sender puts here is overwritten.
    hop: int | None = Field(default=None, ge=0)
    trace_id: str | None = None

    @field_validator("from_", mode="before")
    @classmethod
    def _from_may_be_a_slug(cls, value: Any) -> Any:
        return _agent_ref(value)

    @field_validator("to", mode="before")
    @classmethod
    def _to_may_be_slugs(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [_agent_ref(v) for v in value]
        return _agent_ref(value)


class TaskRequest(EnvelopeBase):
    kind: Literal["task_request"]
    payload: TaskRequestPayload


class TaskResponse(EnvelopeBase):
    kind: Literal["task_response"]
    payload: TaskResponsePayload


class ReviewRequest(EnvelopeBase):
    kind: Literal["review_request"]
    payload: ReviewRequestPayload


class ReviewResponse(EnvelopeBase):
    kind: Literal["review_response"]
    payload: ReviewResponsePayload


class StatusUpdate(EnvelopeBase):
    kind: Literal["status_update"]
    payload: StatusUpdatePayload


class KnowledgeShare(EnvelopeBase):
    kind: Literal["knowledge_share"]
    payload: KnowledgeSharePayload


class Question(EnvelopeBase):
    kind: Literal["question"]
    payload: QuestionPayload
    expects_response: bool = True


class Escalation(EnvelopeBase):
    kind: Literal["escalation"]
    payload: EscalationPayload
    expects_response: bool = True


class CompletionNotice(EnvelopeBase):
    kind: Literal["completion_notice"]
    payload: CompletionNoticePayload


class Broadcast(EnvelopeBase):
    kind: Literal["broadcast"]
    payload: BroadcastPayload


class Request(EnvelopeBase):
    kind: Literal["request"]
    payload: RequestPayload = Field(default_factory=RequestPayload)


class Response(EnvelopeBase):
    kind: Literal["response"]
    payload: ResponsePayload = Field(default_factory=ResponsePayload)

    @model_validator(mode="after")
    def _answers_something(self) -> Response:
        if not self.correlation_id:
            raise conditional(
                "correlationId", "a response must carry the correlationId of its request"
            )
        return self


class Notification(EnvelopeBase):
    kind: Literal["notification"]
    payload: NotificationPayload


Envelope = Annotated[
    TaskRequest
    | TaskResponse
    | ReviewRequest
    | ReviewResponse
    | StatusUpdate
    | KnowledgeShare
    | Question
    | Escalation
    | CompletionNotice
    | Broadcast
    | Request
    | Response
    | Notification,
    Field(discriminator="kind"),
]

ENVELOPE_ADAPTER: TypeAdapter[Envelope] = TypeAdapter(Envelope)

KINDS: tuple[str, ...] = (
    "task_request",
    "task_response",
    "review_request",
    "review_response",
    "status_update",
    "knowledge_share",
    "question",
    "escalation",
    "completion_notice",
    "broadcast",
    "request",
    "response",
    "notification",
)

# Names the seed documents use for the same kinds.
ALIASES: dict[str, str] = {
    "implementation_request": "task_request",
    "information_share": "knowledge_share",
    "data_share": "knowledge_share",
}

# Kinds that fan out to many recipients instead of one target.
FAN_OUT_KINDS = frozenset({"broadcast", "knowledge_share"})


def canonical_kind(kind: str) -> str | None:
    """The canonical kind for a kind or alias in any of the seeds' spellings, else None."""
    normal = re.sub(r"[\s-]+", "_", kind.strip().lower())
    if normal in KINDS:
        return normal
    return ALIASES.get(normal)


def valid_kinds_text() -> str:
    aliases = ", ".join(f"{alias} (= {kind})" for alias, kind in ALIASES.items())
    return f"{', '.join(KINDS)}; aliases: {aliases}"


def _location(loc: tuple[int | str, ...], ctx: dict[str, Any] | None) -> str:
    parts = [str(p) for p in loc]
    # A discriminated union puts the tag first: ('task_response', 'payload', 'reason').
    if parts and parts[0] in KINDS:
        parts = parts[1:]
    if ctx and "field" in ctx:
        parts.append(str(ctx["field"]))
    return ".".join(parts)


def problems_from(exc: ValidationError) -> list[FieldProblem]:
    problems = []
    for error in exc.errors(include_url=False):
        ctx = error.get("ctx")
        if error["type"] == "union_tag_invalid":
            problems.append(
                FieldProblem(
                    "kind",
                    f"unknown kind {ctx['tag'] if ctx else '?'!r}; valid kinds: "
                    f"{valid_kinds_text()}",
                )
            )
        elif error["type"] == "union_tag_not_found":
            problems.append(FieldProblem("kind", f"kind is required; one of {valid_kinds_text()}"))
        else:
            problems.append(FieldProblem(_location(error["loc"], ctx), error["msg"]))
    return problems


def parse_envelope(data: Any) -> Envelope:
    """Validate an envelope (a decoded JSON value) and return it with its canonical kind.

    Aliases are rewritten to their canonical kind before validation (`implementation_request`
    becomes a `task_request` whose taskType defaults to implementation). Raises
    `ValidationFailed` listing every problem; never raises anything else for any input.
    """
    if not isinstance(data, dict):
        raise ValidationFailed(
            "the envelope must be a JSON object",
            [FieldProblem("", f"expected an object, got {type(data).__name__}")],
        )
    data = dict(data)
    raw_kind = data.get("kind", data.get("type"))
    if "type" in data and "kind" not in data:
        # Seed 002 calls the discriminator `type`; accept it as a spelling of `kind`.
        data["kind"] = data.pop("type")
    if isinstance(raw_kind, str):
        kind = canonical_kind(raw_kind)
        if kind is None:
            raise ValidationFailed(
                "invalid envelope",
                [
                    FieldProblem(
                        "kind",
                        f"unknown kind {raw_kind!r}; valid kinds: {valid_kinds_text()}",
                    )
                ],
            )
        data["kind"] = kind
    try:
        return ENVELOPE_ADAPTER.validate_python(data)
    except ValidationError as exc:
        raise ValidationFailed("invalid envelope", problems_from(exc)) from None
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValidationFailed("invalid envelope", [FieldProblem("", str(exc))]) from None


def envelope_json(envelope: Envelope) -> dict[str, Any]:
    """The envelope as stored and forwarded: camelCase, without unset optional fields."""
    return envelope.model_dump(mode="json", by_alias=True, exclude_none=True)


def envelope_summary(envelope: Envelope) -> str:
    """A one-line human summary of an envelope (the audit log's messageSummary)."""
    p = envelope.payload
    if isinstance(p, TaskResponsePayload):
        text = p.action + (f": {p.reason}" if p.reason else "")
    elif isinstance(p, ReviewResponsePayload):
        text = p.verdict + (f": {p.summary}" if p.summary else "")
    else:
        fields = ("title", "summary", "topic", "text", "reason", "progress", "action")
        values = (getattr(p, name, None) for name in fields)
        text = next((v for v in values if isinstance(v, str) and v), envelope.kind)
    return text[:200]


def envelope_files(envelope: Envelope) -> list[str]:
    """File paths an envelope mentions (the audit log's `files`)."""
    p = envelope.payload
    files: list[str] = []
    if isinstance(p, TaskRequestPayload):
        files = [*p.context.files, *p.context.related_files]
    elif isinstance(p, ReviewRequestPayload | EscalationPayload | CompletionNoticePayload):
        files = list(p.files)
    elif isinstance(p, ReviewResponsePayload):
        files = [c.file for c in p.concerns]
    elif isinstance(p, TaskResponsePayload) and p.result:
        files = list(p.result.files_changed)
    return files
