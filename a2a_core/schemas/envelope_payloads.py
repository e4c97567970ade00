"""The payloads of the typed envelopes (`a2a_core.schemas.envelopes`), one model per kind,
and the strict base every envelope model shares."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

Priority = Literal["low", "normal", "high", "urgent"]
ShortText = Annotated[str, Field(min_length=1, max_length=500)]
Title = Annotated[str, Field(min_length=1, max_length=200)]
LongText = Annotated[str, Field(max_length=100_000)]
Slug = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")]


class Strict(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        str_strip_whitespace=True,
    )


class Open(Strict):
    """A free-form bag of context: named fields are checked, anything else is kept."""

    model_config = ConfigDict(extra="allow")


def conditional(field: str, message: str) -> PydanticCustomError:
    # The formatter appends `field` to the error's location so the path is exact.
    return PydanticCustomError("conditional_required", message, {"field": field})


class TaskContext(Open):
    files: list[str] = Field(default_factory=list, max_length=500)
    branch: str | None = None
    worktree: str | None = None
    related_files: list[str] = Field(default_factory=list, max_length=500)


class TaskRequestPayload(Strict):
    task_id: str | None = None
    title: Title
    description: LongText = ""
    task_type: Literal["implementation", "review", "research", "analysis", "design"] = (
        "implementation"
    )
    complexity: Literal["trivial", "low", "medium", "high", "expert"] = "medium"
    deadline: datetime | None = None
    acceptance_criteria: list[ShortText] = Field(default_factory=list, max_length=100)
    context: TaskContext = Field(default_factory=TaskContext)


class TaskResult(Open):
    summary: LongText | None = None
    branch: str | None = None
    worktree: str | None = None
    files_changed: list[str] = Field(default_factory=list, max_length=1000)
    next_steps: list[ShortText] = Field(default_factory=list, max_length=100)


class TaskResponsePayload(Strict):
    task_id: ShortText
    action: Literal["accepted", "declined", "completed", "failed", "blocked"]
    reason: LongText | None = None
    result: TaskResult | None = None

    @model_validator(mode="after")
    def _reason_when_not_done(self) -> TaskResponsePayload:
        if self.action in ("declined", "failed", "blocked") and not self.reason:
            raise conditional(
                "reason", f"reason is required when action is '{self.action}': say why"
            )
        return self


class ReviewRequestPayload(Strict):
    task_id: str | None = None
    title: Title
    files: list[ShortText] = Field(
        min_length=1,
        max_length=1000,
        validation_alias=AliasChoices("files", "filesForReview"),
    )
    branch: str | None = None
    worktree: str | None = None
    author_agent: str | None = None
    author_tier: str | None = None
    review_level: str | None = None
    prior_review_notes: LongText | None = None


class Concern(Strict):
    file: ShortText
    line: int | None = Field(default=None, ge=1)
    severity: Literal["must_fix", "should_fix", "suggestion"]
    description: LongText


class ReviewerFix(Strict):
    file: ShortText
    description: LongText


class ReviewResponsePayload(Strict):
    task_id: str | None = None
    verdict: Literal["approved", "changes_requested", "escalated"]
    summary: LongText | None = None
    branch: str | None = None
    worktree: str | None = None
    concerns: list[Concern] = Field(
        default_factory=list,
        max_length=1000,
        validation_alias=AliasChoices("concerns", "unresolvedConcerns"),
    )
    reviewer_fixes: list[ReviewerFix] = Field(default_factory=list, max_length=1000)
    next_action: Literal["send_back_to_worker", "push_and_close", "escalate_to_senior"] | None = (
        None
    )

    @model_validator(mode="after")
    def _changes_need_concerns(self) -> ReviewResponsePayload:
        if self.verdict == "changes_requested" and not self.concerns:
            raise conditional(
                "concerns",
                "concerns must list at least one item when verdict is 'changes_requested'",
            )
        return self


class StatusUpdatePayload(Strict):
    task_id: str | None = None
    status: Literal["in_progress", "blocked", "completed", "paused"]
    progress: ShortText
    percent: float | None = Field(default=None, ge=0, le=100)
    blocked_by: ShortText | None = None
    estimated_completion: datetime | None = None

    @model_validator(mode="after")
    def _blocker_named(self) -> StatusUpdatePayload:
        if self.status == "blocked" and not self.blocked_by:
            raise conditional("blockedBy", "blockedBy is required when status is 'blocked'")
        return self


class KnowledgeSharePayload(Strict):
    topic: Title
    discovery: LongText | None = None
    data_type: ShortText | None = None
    data: Any = None
    relevant_to: list[Slug] = Field(default_factory=list, max_length=1000)
    source: ShortText | None = None
    actionable: bool = False
    suggested_action: LongText | None = None

    @model_validator(mode="after")
    def _has_content(self) -> KnowledgeSharePayload:
        if not self.discovery and not (self.data_type and self.data is not None):
            raise conditional("discovery", "give a discovery (text) or a dataType with its data")
        return self


class QuestionPayload(Strict):
    text: LongText = Field(min_length=1)
    options: list[ShortText] = Field(default_factory=list, max_length=50)
    answer_schema: dict[str, Any] | None = None
    context: LongText | None = None


class EscalationPayload(Strict):
    reason: LongText = Field(min_length=1)
    summary: LongText | None = None
    files: list[ShortText] = Field(default_factory=list, max_length=1000)
    task_id: str | None = None


class CompletionNoticePayload(Strict):
    summary: LongText = Field(min_length=1)
    task_id: str | None = None
    files: list[ShortText] = Field(default_factory=list, max_length=1000)


class BroadcastPayload(Strict):
    scope: ShortText
    topic: Title
    message: LongText = Field(min_length=1)
    urgency: Literal["fyi", "attention_needed", "action_required"] = "fyi"


class RequestPayload(Strict):
    action: ShortText | None = None
    text: LongText | None = None
    data: Any = None


class ResponsePayload(Strict):
    text: LongText | None = None
    data: Any = None
    error: LongText | None = None


class NotificationPayload(Strict):
    text: LongText | None = None
    data: Any = None

    @model_validator(mode="after")
    def _has_content(self) -> NotificationPayload:
        if not self.text and self.data is None:
            raise conditional("text", "a notification needs text or data")
        return self
