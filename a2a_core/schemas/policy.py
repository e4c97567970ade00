"""The policy: one validated document, versioned by the hub.

Everything an admin can change is here: the routing kill switch, who may route to whom (a
matrix of caller -> target rules with a default, and rules granting a chain's root caller a
target through named agents), rate limits, the hop limit and loop detection, circuit breakers,
approval rules, redirect rules and content rules (what a message or an answer may carry:
`a2a_core.policy.content`). Agent ids are slugs; `*` matches any agent.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic.alias_generators import to_camel

from a2a_core.errors import FieldProblem, ValidationFailed, field_problems
from a2a_core.schemas.envelopes import ALIASES, KINDS

Action = Literal["allow", "deny", "approve"]
Priority = Literal["low", "normal", "high", "urgent"]
Pattern = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^(\*|[a-z0-9][a-z0-9_-]*)$")]
Kind = Annotated[str, Field(min_length=1, max_length=40)]

ANY = "*"
VALID_KINDS = frozenset(KINDS) | frozenset(ALIASES)


class Strict(BaseModel):
    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True
    )


class _KindsAndSkills(Strict):
    kinds: list[Kind] = Field(default_factory=list, max_length=50)
    skills: list[str] = Field(default_factory=list, max_length=50)

    @model_validator(mode="after")
    def _known_kinds(self) -> _KindsAndSkills:
        unknown = sorted(set(self.kinds) - VALID_KINDS)
        if unknown:
            raise ValueError(f"unknown kind(s) {unknown}; valid: {sorted(VALID_KINDS)}")
        return self


class MatrixRule(_KindsAndSkills):
    """Whether `caller` may route to `target`, optionally only for some kinds or skills.

    With `via`, the rule is about delegation instead: whether the root caller of a chain
    (`caller`) may reach `target` through agents acting for it. It applies only when every
    agent between the root and the target matches one of `via`, and never to a direct call
    (`a2a_core.policy.decide`, the delegation check)."""

    caller: Pattern
    target: Pattern
    action: Action
    via: list[Pattern] = Field(default_factory=list, max_length=20)

    @field_validator("via", mode="before")
    @classmethod
    def _one_or_several(cls, value: Any) -> Any:
        # One agent may be given as a string.
        return [value] if isinstance(value, str) else value

    @model_serializer(mode="wrap")
    def _without_empty_via(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Rules without `via` are stored as they were before it existed: documents published
        # earlier compare (and diff) equal.
        data: dict[str, Any] = handler(self)
        if not self.via:
            data.pop("via", None)
        return data


class RateLimits(Strict):
    """Per caller: messages per minute and per hour, tasks in flight at once. Per target:
    incoming messages per minute; for an endpoint agent, the calls the hub has at its server
    at once (more wait in the hub, in order, within their timeout); for an inbox agent, the
    deliveries waiting for it (queued while it is offline, or sent and not acknowledged
    yet). None means no limit. Also per agent: how long a question it puts to the humans
    stays open (None: the hub's HUB_QUESTION_DEADLINE_SECONDS), and so how long a message it
    sends waits for approval when no approval rule set a deadline."""

    per_minute: int | None = Field(default=600, ge=1)
    per_hour: int | None = Field(default=20000, ge=1)
    concurrent: int | None = Field(default=50, ge=1)
    incoming_per_minute: int | None = Field(default=None, ge=1)
    incoming_concurrent: int | None = Field(default=10, ge=1)
    inbox_queue: int | None = Field(default=1000, ge=1)
    question_deadline_seconds: int | None = Field(default=None, ge=10, le=7 * 86400)


class Breaker(Strict):
    """A target that fails `failure_threshold` times in a row is skipped for `cooldown_seconds`;
    then one call is let through (half-open): success closes the breaker, failure reopens it."""

    enabled: bool = True
    failure_threshold: int = Field(default=5, ge=1, le=1000)
    cooldown_seconds: float = Field(default=30.0, gt=0, le=86400)


class ApprovalRule(_KindsAndSkills):
    """Messages matching every condition given (any value in a list) wait for a human, until
    `deadline_seconds` (None: the caller's `questionDeadlineSeconds`, as for questions)."""

    name: Annotated[str, Field(min_length=1, max_length=80)]
    priorities: list[Priority] = Field(default_factory=list)
    callers: list[Pattern] = Field(default_factory=list)
    targets: list[Pattern] = Field(default_factory=list)
    deadline_seconds: int | None = Field(default=None, ge=10, le=7 * 86400)
    timeout_outcome: Literal["reject", "approve"] = "reject"

    @model_validator(mode="after")
    def _has_a_condition(self) -> ApprovalRule:
        if not (self.kinds or self.skills or self.priorities or self.callers or self.targets):
            raise ValueError("an approval rule needs at least one condition")
        return self


Unavailable = Literal["suspended", "circuit_open", "offline"]


def _default_when() -> list[Unavailable]:
    return ["suspended", "circuit_open"]


class RedirectRule(Strict):
    """When the target is unavailable for one of `when`, send a new task to the first agent
    of `to` that can take it and that the matrix does not deny the caller. With `to` empty:
    to an agent with the skill the message asked for that a matrix rule lets the caller reach
    (the default for unlisted pairs is not enough: sharing a skill id does not make an agent,
    maybe another team's, a stand-in)."""

    targets: list[Pattern] = Field(default_factory=lambda: [ANY])
    when: list[Unavailable] = Field(default_factory=_default_when, min_length=1)
    to: list[Pattern] = Field(default_factory=list, max_length=20)

    @field_validator("to", mode="before")
    @classmethod
    def _one_or_several(cls, value: Any) -> Any:
        # Earlier documents name one agent, or none (null).
        if value is None:
            return []
        return [value] if isinstance(value, str) else value


Detect = Literal["secrets", "card", "iban", "email", "phone", "pattern"]
ContentDirection = Literal["request", "answer", "both"]
ContentAction = Literal["hold", "redact", "reject"]
# A custom pattern: RE2 syntax (linear time, no backreferences or lookarounds).
MAX_PATTERN_CHARS = 500
MAX_CONTENT_RULES = 200


class ContentRule(_KindsAndSkills):
    """What a message (`direction` request), an agent's answer (answer) or both may not carry:
    a secret (Yelp's detect-secrets plugins), a card number (Luhn checksum), an IBAN (its check
    digits), an email address, a phone number, or a custom `pattern` (RE2). Scoped like the
    other rules by callers, targets, kinds and skills (empty: any); for an answer, the caller
    is the agent that asked and the target the one answering. `action`: hold the message for
    a human (requests only: nobody waits to approve an answer mid-call), redact each match
    (`[redacted: <kind>]`), or reject it with `reason`. `examples`: strings the rule must
    find, shown in the editor and checked here."""

    name: Annotated[str, Field(min_length=1, max_length=80)]
    detect: Detect
    pattern: str | None = Field(default=None, min_length=1, max_length=MAX_PATTERN_CHARS)
    direction: ContentDirection = "request"
    callers: list[Pattern] = Field(default_factory=list)
    targets: list[Pattern] = Field(default_factory=list)
    action: ContentAction = "redact"
    reason: str = Field(default="", max_length=300)
    examples: list[Annotated[str, Field(min_length=1, max_length=2000)]] = Field(
        default_factory=list, max_length=20
    )

    @model_validator(mode="after")
    def _consistent(self) -> ContentRule:
        # Imported here: the detectors import this module's types.
        from a2a_core.policy.content import compile_pattern, rule_finds

        if (self.detect == "pattern") != (self.pattern is not None):
            raise ValueError("`pattern` is required with detect 'pattern', and only with it")
        if self.pattern is not None:
            compile_pattern(self.pattern)  # ValueError with RE2's message
        if self.action == "hold" and self.direction != "request":
            raise ValueError(
                "an answer cannot be held (nobody waits to approve it mid-call): use redact "
                "or reject, or direction 'request'"
            )
        for number, example in enumerate(self.examples):
            if not rule_finds(self, example):
                raise ValueError(
                    f"example {number} ({example[:40]!r}) does not match this rule's "
                    f"{self.detect} detector"
                )
        return self


def _default_approvals() -> list[ApprovalRule]:
    return [ApprovalRule(name="escalations need a human", kinds=["escalation"])]


def _default_redirects() -> list[RedirectRule]:
    return [RedirectRule()]


class Policy(Strict):
    routing_enabled: bool = True
    default_action: Action = "allow"
    matrix: list[MatrixRule] = Field(default_factory=list, max_length=100_000)
    limits: RateLimits = Field(default_factory=RateLimits)
    # Per-caller overrides of `limits` (slug -> limits).
    agent_limits: dict[str, RateLimits] = Field(default_factory=dict)
    max_hops: int = Field(default=5, ge=1, le=100)
    loop_detection: bool = True
    breaker: Breaker = Field(default_factory=Breaker)
    approvals: list[ApprovalRule] = Field(default_factory=_default_approvals, max_length=1000)
    redirects: list[RedirectRule] = Field(default_factory=_default_redirects, max_length=1000)
    content_rules: list[ContentRule] = Field(default_factory=list, max_length=MAX_CONTENT_RULES)

    @field_validator("content_rules")
    @classmethod
    def _content_names_unique(cls, rules: list[ContentRule]) -> list[ContentRule]:
        # A rule's name is what a redaction mark and a finding record point back to.
        names = [rule.name for rule in rules]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"content rule names must be unique; repeated: {twice}")
        return rules

    def as_document(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


POLICY_ADAPTER: TypeAdapter[Policy] = TypeAdapter(Policy)


def default_policy() -> Policy:
    return Policy()


def parse_policy(data: Any) -> Policy:
    """Validate a policy document; `ValidationFailed` lists every problem with its path."""
    if not isinstance(data, dict):
        raise ValidationFailed(
            "a policy must be a JSON object",
            [FieldProblem("", f"expected an object, got {type(data).__name__}")],
        )
    try:
        return POLICY_ADAPTER.validate_python(data)
    except ValidationError as exc:
        problems = field_problems(exc.errors(include_url=False))
        raise ValidationFailed(f"invalid policy ({len(problems)} problems)", problems) from None
