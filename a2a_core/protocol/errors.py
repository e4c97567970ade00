"""The hub's errors in A2A form, and the mapping from the hub's exception hierarchy.

A2A reserves JSON-RPC codes -32001..-32099 for A2A-specific errors; the spec defines
-32001..-32009 and the hub uses -32050..-32061 for its own. Each hub error is registered in
the a2a-sdk's public error tables, so the SDK's JSON-RPC and REST dispatchers render it with
the right JSON-RPC code, HTTP status and `google.rpc.ErrorInfo` reason, like its own errors.
"""

from __future__ import annotations

import math
from typing import Any

# The SDK's routes first: imported on its own, its 0.3 adapter is a circular import.
import a2a.server.routes  # noqa: F401
from a2a.compat.v0_3 import jsonrpc_adapter
from a2a.server.jsonrpc_models import JSONRPCError
from a2a.server.request_handlers import response_helpers
from a2a.utils import errors as sdk_errors
from a2a.utils.errors import (
    A2AError,
    ErrorMapping,
    InvalidParamsError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

from a2a_core import errors as hub


class HubA2AError(A2AError):
    """Base for the hub's own A2A errors. `data` becomes ErrorInfo.metadata (strings)."""

    def __init__(self, message: str | None = None, data: dict[str, Any] | None = None) -> None:
        metadata = {k: _text(v) for k, v in (data or {}).items() if v is not None}
        super().__init__(message, metadata)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class PermissionDeniedError(HubA2AError):
    message = "Permission denied"


class PolicyRejectedError(HubA2AError):
    message = "Refused by the hub's policy"


class RateLimitedError(HubA2AError):
    message = "Rate limit exceeded"


class CircuitOpenError(HubA2AError):
    message = "Circuit breaker open"


class AgentUnavailableError(HubA2AError):
    message = "Agent unavailable"


class AgentAuthFailedError(HubA2AError):
    message = "The agent refused the hub's credential"


class QueueFullError(HubA2AError):
    message = "Inbox queue full"


class UnauthenticatedError(HubA2AError):
    message = "Authentication required"


class IdentityProviderUnavailableError(HubA2AError):
    message = "The caller's identity provider is unreachable"


class AgentNotFoundError(HubA2AError):
    message = "Agent not found"


class PayloadTooLargeError(HubA2AError):
    message = "Request too large"


class HeaderTooLargeError(HubA2AError):
    message = "Request header too large"


# class -> (JSON-RPC code, HTTP status, gRPC status, ErrorInfo reason)
HUB_ERRORS: dict[type[HubA2AError], tuple[int, int, str, str]] = {
    UnauthenticatedError: (-32050, 401, "UNAUTHENTICATED", "UNAUTHENTICATED"),
    PermissionDeniedError: (-32051, 403, "PERMISSION_DENIED", "PERMISSION_DENIED"),
    AgentNotFoundError: (-32052, 404, "NOT_FOUND", "AGENT_NOT_FOUND"),
    PolicyRejectedError: (-32053, 403, "PERMISSION_DENIED", "POLICY_REJECTED"),
    RateLimitedError: (-32054, 429, "RESOURCE_EXHAUSTED", "RATE_LIMITED"),
    CircuitOpenError: (-32055, 503, "UNAVAILABLE", "CIRCUIT_OPEN"),
    AgentUnavailableError: (-32056, 502, "UNAVAILABLE", "AGENT_UNAVAILABLE"),
    QueueFullError: (-32057, 503, "RESOURCE_EXHAUSTED", "QUEUE_FULL"),
    PayloadTooLargeError: (-32058, 413, "INVALID_ARGUMENT", "PAYLOAD_TOO_LARGE"),
    IdentityProviderUnavailableError: (
        -32059,
        503,
        "UNAVAILABLE",
        "IDENTITY_PROVIDER_UNAVAILABLE",
    ),
    HeaderTooLargeError: (-32060, 431, "INVALID_ARGUMENT", "HEADER_TOO_LARGE"),
    AgentAuthFailedError: (-32061, 502, "UNAVAILABLE", "AGENT_AUTH_FAILED"),
}


def register_with_sdk() -> None:
    """Teach the SDK's dispatchers the hub's errors (idempotent)."""
    for cls, (code, http, grpc_status, reason) in HUB_ERRORS.items():
        sdk_errors.JSON_RPC_ERROR_CODE_MAP[cls] = code
        sdk_errors.A2A_ERROR_MAPPING[cls] = ErrorMapping(http, grpc_status, reason)
        sdk_errors.A2A_ERROR_REASONS[cls] = reason
        response_helpers.EXCEPTION_MAP[cls] = JSONRPCError
    # The gate refuses bodies that are not JSON text itself (before the SDK sees them): give
    # the parse error the SDK has no HTTP mapping for the status of a bad request.
    sdk_errors.JSON_RPC_ERROR_CODE_MAP.setdefault(sdk_errors.JSONParseError, -32700)
    sdk_errors.A2A_ERROR_MAPPING.setdefault(
        sdk_errors.JSONParseError, ErrorMapping(400, "INVALID_ARGUMENT", "PARSE_ERROR")
    )
    sdk_errors.A2A_ERROR_REASONS.setdefault(sdk_errors.JSONParseError, "PARSE_ERROR")
    response_helpers.EXCEPTION_MAP.setdefault(sdk_errors.JSONParseError, JSONRPCError)
    # The SDK's 0.3 JSON-RPC adapter answers every code 0.3 did not define as -32603 (internal
    # error). A 0.3 client is better served by the code the 1.0 path gives: the hub's own
    # (-32050..), and -32009 with the versions to use (JSON-RPC clients take any code).
    jsonrpc_adapter._V03_ERROR_CODES = jsonrpc_adapter._V03_ERROR_CODES | {
        sdk_errors.JSON_RPC_ERROR_CODE_MAP[sdk_errors.VersionNotSupportedError],
        *(code for code, _, _, _ in HUB_ERRORS.values()),
    }


register_with_sdk()


def http_status(error: A2AError) -> int:
    mapping = sdk_errors.A2A_ERROR_MAPPING.get(type(error))
    return mapping.http_code if mapping else 500


def to_a2a(exc: hub.HubError) -> A2AError:
    """Map a hub exception to the A2A error a caller can act on."""
    details = dict(exc.details)
    if isinstance(exc, hub.ValidationFailed):
        return InvalidParamsError(
            exc.message, data={"errors": [p.as_dict() for p in exc.problems], **details}
        )
    if isinstance(exc, hub.NotFound):
        return TaskNotFoundError(exc.message)
    if isinstance(exc, hub.IllegalTransition):
        return UnsupportedOperationError(exc.message, data=details or None)
    if isinstance(exc, hub.Unauthenticated):
        return UnauthenticatedError(exc.message, details)
    if isinstance(exc, hub.PermissionDenied):
        return PermissionDeniedError(exc.message, details)
    if isinstance(exc, hub.PolicyRejected):
        data = {"reason": exc.reason, "retryAfterSeconds": _retry_after(exc), **details}
        if exc.reason.startswith("rate_limit"):
            return RateLimitedError(exc.message, data)
        if exc.reason == "circuit_open":
            return CircuitOpenError(exc.message, data)
        if exc.reason == "queue_full":
            return QueueFullError(exc.message, data)
        return PolicyRejectedError(exc.message, data)
    if isinstance(exc, hub.AgentAuthFailed):
        return AgentAuthFailedError(exc.message, details)
    if isinstance(exc, hub.TargetUnavailable):
        return AgentUnavailableError(exc.message, details)
    if isinstance(exc, hub.QueueFull):
        return QueueFullError(exc.message, details)
    if isinstance(exc, hub.Conflict):
        return UnsupportedOperationError(exc.message, data=details or None)
    return sdk_errors.InternalError(exc.message)


def _retry_after(exc: hub.PolicyRejected) -> int | None:
    # Rounded as the Retry-After header is (`storage.policy_state.retry_seconds`; not imported: this
    # module loads before Django's apps do), so that the two never disagree.
    return None if exc.retry_after is None else max(1, math.ceil(exc.retry_after))
