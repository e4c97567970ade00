"""What every dashboard page's header shows: the user's role, the escalation count and how
many of those escalations are near their deadline."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from a2a_core.selectors.escalations import escalation_counts
from dashboard.roles import role_of


def nav(request: HttpRequest) -> dict[str, Any]:
    def compute() -> dict[str, Any]:
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return {"role": None, "pending_escalations": 0, "expiring_escalations": 0}
        pending, expiring = escalation_counts()
        return {
            "role": role_of(user),
            "pending_escalations": pending,
            "expiring_escalations": expiring,
        }

    return {"nav": SimpleLazyObject(compute)}
