"""What every dashboard page's header shows: the user's role and the escalation count."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from a2a_core.models import Escalation, EscalationStatus
from dashboard.roles import role_of


def nav(request: HttpRequest) -> dict[str, Any]:
    def compute() -> dict[str, Any]:
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return {"role": None, "pending_escalations": 0}
        return {
            "role": role_of(user),
            "pending_escalations": Escalation.objects.filter(
                status=EscalationStatus.PENDING
            ).count(),
        }

    return {"nav": SimpleLazyObject(compute)}
