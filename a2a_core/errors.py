"""The hub's one exception hierarchy.

Services raise these; each edge maps them to its own form: A2A errors (JSON-RPC codes and
google.rpc details) in `protocol/`, HTML error fragments in `dashboard/`, one line and exit
status 2 in the CLI. Messages are written for the person or agent who has to act on them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class FieldProblem:
    """One thing wrong with an input: where (a dotted path) and what."""

    field: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"field": self.field, "message": self.message}

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


def field_problems(errors: Iterable[Mapping[str, Any]], *, skip: int = 0) -> list[FieldProblem]:
    """pydantic's `ValidationError.errors()` as problems with dotted paths (leaving out the
    first `skip` steps of each path, e.g. a discriminated union's tag)."""
    return [
        FieldProblem(".".join(str(step) for step in error["loc"][skip:]), str(error["msg"]))
        for error in errors
    ]


class HubError(Exception):
    """Base class: `code` is a stable machine-readable reason, `message` is for humans."""

    code = "hub_error"

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}


class ValidationFailed(HubError):
    """Input did not validate; `problems` lists every problem found, not just the first."""

    code = "invalid"

    def __init__(
        self,
        message: str,
        problems: list[FieldProblem] | None = None,
        *,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message, details=details)
        self.problems = problems or []

    def __str__(self) -> str:
        if not self.problems:
            return self.message
        return self.message + "\n" + "\n".join(f"  - {p}" for p in self.problems)


class NotFound(HubError):
    code = "not_found"


class Conflict(HubError):
    code = "conflict"


class IllegalTransition(Conflict):
    """A task state change the A2A state machine does not allow."""

    code = "illegal_transition"


class PermissionDenied(HubError):
    code = "permission_denied"


class AgentSuspended(PermissionDenied):
    """The agent is suspended: the hub neither delivers to it nor takes its calls."""

    code = "agent_suspended"

    def __init__(self, slug: str, reason: str = "") -> None:
        super().__init__(
            f"{slug} is suspended"
            + (f" ({reason})" if reason else "")
            + ": the hub delivers nothing to it and takes none of its calls until an admin "
            "resumes it",
            details={"agent": slug, "status": "suspended"},
        )


class Unauthenticated(HubError):
    code = "unauthenticated"


class PolicyRejected(HubError):
    """The policy refused a message; `reason` is the policy's reason code."""

    code = "policy_rejected"

    def __init__(
        self,
        message: str,
        *,
        reason: str,
        retry_after: float | None = None,
        details: dict[str, Any] | None = None,
        decided_by: str = "",
    ) -> None:
        super().__init__(message, details=details)
        self.reason = reason
        self.retry_after = retry_after
        # Who stands behind the refusal ("policy v3 by alice"): for the hub's own record and
        # spans, not told to the caller.
        self.decided_by = decided_by


class TargetUnavailable(HubError):
    """The target agent could not be reached or did not answer in time."""

    code = "target_unavailable"


class AgentAuthFailed(TargetUnavailable):
    """The agent refused the credential the hub called it with (HTTP 401/403, gRPC
    UNAUTHENTICATED/PERMISSION_DENIED), or the hub could not get one to send (an OAuth2 token
    endpoint that refused, failed or did not answer). Not the agent being down: its breaker is
    not told. The message names the agent and the scheme, never the secret."""

    code = "agent_auth_failed"


class QueueFull(HubError):
    code = "queue_full"
