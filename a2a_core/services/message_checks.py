"""Checking a message on its way in: its parts, its sender, its timeout, its trace id."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from a2a_core.errors import FieldProblem, ValidationFailed
from a2a_core.models import Agent
from a2a_core.schemas.a2a import HUB_METADATA, envelope_part_indexes

MAX_TIMEOUT_SECONDS = 3600


def message_timeout(hub: dict[str, Any]) -> float:
    """The call's timeout: `metadata.a2aHub.timeoutSeconds` (`hub`) or the hub's default;
    one outside (0, MAX_TIMEOUT_SECONDS] is a ValidationFailed."""
    value = hub.get("timeoutSeconds")
    if value is None:
        return float(settings.HUB_FORWARD_TIMEOUT)
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 < value <= MAX_TIMEOUT_SECONDS
    ):
        raise ValidationFailed(
            "invalid timeout",
            [
                FieldProblem(
                    f"metadata.{HUB_METADATA}.timeoutSeconds",
                    f"must be a number of seconds in (0, {MAX_TIMEOUT_SECONDS}], got {value!r}",
                )
            ],
        )
    return float(value)


def message_parts_check(message: dict[str, Any]) -> None:
    """At most `HUB_MAX_PARTS` parts."""
    parts = message.get("parts") or []
    if len(parts) > settings.HUB_MAX_PARTS:
        raise ValidationFailed(
            "too many parts",
            [
                FieldProblem(
                    "message.parts",
                    f"the message has {len(parts)} parts; the limit is {settings.HUB_MAX_PARTS}",
                )
            ],
        )


def message_sender_check(
    envelope: dict[str, Any] | None, message: dict[str, Any], caller: Agent
) -> None:
    """An envelope naming a sender names the caller (the bearer token's agent)."""
    claimed = ((envelope or {}).get("from") or {}).get("agentId")
    if claimed and claimed != caller.slug:
        index = envelope_part_indexes(message)[0]
        raise ValidationFailed(
            "the envelope's sender is not the caller",
            [
                FieldProblem(
                    f"message.parts[{index}].data.from.agentId",
                    f"says {claimed!r} but the bearer token belongs to {caller.slug!r}",
                )
            ],
        )
