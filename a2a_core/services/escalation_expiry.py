"""Deadlines on what waits for a human: questions past theirs expire, held messages past
theirs take their rule's timeout outcome. Run by every worker's periodic loop
(`a2a_core.runtime`); safe to run in all of them at once."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from a2a_core.errors import Conflict
from a2a_core.models import Escalation, EscalationKind, EscalationStatus, NotifyEvent
from a2a_core.services.escalations import DEADLINE, escalation_approve, escalation_reject
from a2a_core.services.notify import notify_queue
from a2a_core.services.questions import announce_escalation


def _questions_expire(now: Any) -> None:
    """Questions past their deadline expire (people are told); the agent's task is left as
    it is: the agent decides what no answer means."""
    for escalation in Escalation.objects.filter(
        status=EscalationStatus.PENDING, kind=EscalationKind.INPUT_REQUIRED, deadline__lt=now
    )[:100]:
        with transaction.atomic():
            if not Escalation.objects.filter(
                pk=escalation.pk, status=EscalationStatus.PENDING
            ).update(status=EscalationStatus.EXPIRED, decided_at=now):
                continue  # answered or expired by another worker meanwhile
            escalation.status = EscalationStatus.EXPIRED
            announce_escalation(escalation, "escalation.decided")
            notify_queue(escalation=escalation, event=NotifyEvent.EXPIRED)


def escalations_expire(*, now: Any = None) -> int:
    """Apply the timeout outcome to every pending approval past its deadline; returns how many.

    Safe to run in every worker at once: each escalation is decided by whoever locks it first.
    """
    now = now or timezone.now()
    _questions_expire(now)
    due = list(
        Escalation.objects.filter(
            status=EscalationStatus.PENDING, kind=EscalationKind.APPROVAL, deadline__lt=now
        ).values_list("pk", "timeout_outcome")[:100]
    )
    done = 0
    for pk, outcome in due:
        try:
            with transaction.atomic():
                if outcome == "approve":
                    escalation_approve(escalation_id=pk, actor_label=DEADLINE)
                else:
                    escalation = escalation_reject(
                        escalation_id=pk,
                        reason="nobody decided before the deadline",
                        actor_label=DEADLINE,
                    )
                    Escalation.objects.filter(pk=escalation.pk).update(
                        status=EscalationStatus.EXPIRED
                    )
                    notify_queue(escalation=escalation, event=NotifyEvent.EXPIRED)
            done += 1
        except Conflict:
            continue  # another worker decided it first
    return done
