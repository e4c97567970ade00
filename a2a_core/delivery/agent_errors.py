"""What can go wrong calling an endpoint agent, as the hub's errors: no answer in time, no
connection, a failure, an answer that is not A2A (saying what was wrong), an A2A error."""

from __future__ import annotations

import json
import re
from contextvars import ContextVar
from typing import Any

from a2a.utils.errors import A2AError
from google.protobuf.json_format import ParseError

from a2a_core.errors import HubError, TargetUnavailable


class AgentTimeout(HubError):
    """The agent did not answer in time."""

    code = "agent_timeout"


class NoSlotInTime(AgentTimeout):
    """Every one of the agent's slots stayed taken for the call's whole time: it was not sent
    (not a failure of the agent's: its breaker does not count it)."""


class AgentUnreachable(TargetUnavailable):
    """The agent's server could not be reached (down, refusing connections)."""

    code = "agent_unreachable"


class AgentFailed(TargetUnavailable):
    """The agent's server answered with an HTTP error or something that is not A2A."""

    code = "agent_failed"


class AgentNotA2A(AgentFailed):
    """The agent answered with something that is not valid A2A; the message says what."""


class AgentRefused(HubError):
    """The agent answered with an A2A error; `error` is relayed to the caller as it is."""

    code = "agent_refused"

    def __init__(self, message: str, error: A2AError) -> None:
        super().__init__(message)
        self.error = error


last_result: ContextVar[Any] = ContextVar("last_result", default=None)
# What the SDK raises for an answer that is JSON but not A2A (protobuf's ParseError for
# ProtoJSON; pydantic's ValidationError, a ValueError, for A2A 0.3).
NOT_A2A = (ParseError, ValueError, TypeError, KeyError)
_PARSE_PATH = re.compile(r" at [A-Za-z_]\w*((?:\.\w+|\[\d+\])*)\.*$")
_NO_OFFSET = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d+)?)?")
_MISSING = object()


def _value_at(document: Any, path: str) -> Any:
    for step in re.findall(r"\w+|\[\d+\]", path):
        if step.startswith("["):
            index = int(step[1:-1])
            ok = isinstance(document, list) and index < len(document)
            document = document[index] if ok else _MISSING
        else:
            document = document.get(step, _MISSING) if isinstance(document, dict) else _MISSING
        if document is _MISSING:
            break
    return document


def not_a2a(exc: BaseException) -> AgentNotA2A:
    """An agent's answer the SDK could not read as A2A, as an agent failure saying what was
    wrong: where in the answer, and the value found there when it is known."""
    innermost = exc
    while innermost.__cause__ is not None:
        innermost = innermost.__cause__
    found = _PARSE_PATH.search(str(exc)) if isinstance(exc, ParseError) else None
    path = found.group(1).lstrip(".") if found else ""
    reason = _PARSE_PATH.sub("", str(innermost)).rstrip(".")[:300] or type(innermost).__name__
    value = _value_at(last_result.get(), path) if path else _MISSING
    if path.lower().endswith("timestamp"):
        if isinstance(value, str) and _NO_OFFSET.fullmatch(value):
            what = f"{path} {value!r} has no offset"
        elif value is not _MISSING:
            what = f"{path} {json.dumps(value)} is not an RFC 3339 timestamp"
        else:
            what = f"{path} is not an RFC 3339 timestamp with an offset"
    elif value is not _MISSING:
        what = f"{path} {json.dumps(value)[:200]}: {reason}"
    else:
        what = f"{path}: {reason}" if path else reason
    return AgentNotA2A(f"sent an answer that is not valid A2A: {what}")
