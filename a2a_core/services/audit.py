"""Recording what humans (and the system, on their behalf) did."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User

from a2a_core.models import Agent, AuditEvent


def audit_record(
    *,
    action: str,
    summary: str,
    actor: User | None = None,
    actor_label: str = "",
    agent: Agent | None = None,
    object_type: str = "",
    object_id: str | int = "",
    data: dict[str, Any] | None = None,
) -> AuditEvent:
    """Append one audit event. Call inside the transaction of the change it describes."""
    if actor is not None and not getattr(actor, "is_authenticated", False):
        actor = None
    return AuditEvent.objects.create(
        action=action,
        summary=summary[:500],
        actor=actor,
        actor_label=actor_label or (actor.get_username() if actor else "system"),
        agent=agent,
        object_type=object_type,
        object_id=str(object_id),
        data=data or {},
    )
