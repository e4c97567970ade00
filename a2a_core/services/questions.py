"""An agent's question for the humans operating the hub: an escalation they answer, withdrawn
when the task moves on."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from a2a_core.events import publish_many_on_commit
from a2a_core.models import (
    PRIORITY_RANK,
    Agent,
    Escalation,
    EscalationKind,
    EscalationStatus,
    Priority,
    Task,
)
from a2a_core.schemas.a2a import (
    envelope_part_indexes,
    text_of,
)
from a2a_core.schemas.events import EscalationChange, EscalationChanged
from a2a_core.services.notify import notify_queue
from a2a_core.services.policy import current_policy


def escalation_deadline(*, slug: str, seconds: int | None = None) -> datetime:
    """When an escalation about agent `slug` expires: after `seconds` when given (an approval
    rule's own deadline), else after the live policy's `questionDeadlineSeconds` for that
    agent (its own limits, else the global ones), else after HUB_QUESTION_DEADLINE_SECONDS."""
    if seconds is None:
        seconds = current_policy().limits_for(slug).question_deadline_seconds
    if seconds is None:
        seconds = settings.HUB_QUESTION_DEADLINE_SECONDS
    return timezone.now() + timedelta(seconds=seconds)


def ask_human(task: Task, status: dict[str, Any], priority: str) -> None:
    """An agent's question for the humans operating the hub: an escalation they answer."""
    message = status.get("message") or {}
    question = text_of(message.get("parts") or [])
    slug = Agent.objects.values_list("slug", flat=True).get(pk=task.target_id)
    escalation = Escalation.objects.create(
        kind=EscalationKind.INPUT_REQUIRED,
        priority=priority,
        priority_rank=PRIORITY_RANK[Priority(priority)],
        task=task,
        agent_id=task.target_id,
        question=question or "(the agent asked without words; see the task)",
        answer_schema=_answer_schema(message),
        options=_options(_question_payload(message).get("options")),
        deadline=escalation_deadline(slug=slug),
    )
    announce_escalation(escalation, "escalation.opened")
    notify_queue(escalation=escalation, event="arrived")


def _question_payload(message: dict[str, Any]) -> dict[str, Any]:
    """The payload of the first `question` envelope among the message's parts, or {}."""
    for index in envelope_part_indexes(message):
        envelope = message["parts"][index].get("data")
        if isinstance(envelope, dict) and envelope.get("kind") == "question":
            payload = envelope.get("payload")
            return payload if isinstance(payload, dict) else {}
    return {}


def _options(offered: Any) -> list[str]:
    """The quick replies an agent offered: up to 50 texts of up to 500 characters."""
    if not isinstance(offered, list):
        return []
    return [o[:500] for o in offered if isinstance(o, str) and o.strip()][:50]


def _answer_schema(message: dict[str, Any]) -> dict[str, Any] | None:
    """The `answerSchema` of the message's question envelope: the agent wants structured data
    in the humans' answer."""
    schema = _question_payload(message).get("answerSchema")
    return schema if isinstance(schema, dict) else None


def withdraw_questions(task: Task) -> None:
    """The task moved on: questions to humans still open on it are withdrawn."""
    open_ = Escalation.objects.filter(
        task=task, kind=EscalationKind.INPUT_REQUIRED, status=EscalationStatus.PENDING
    )
    for escalation in open_:
        escalation.status = EscalationStatus.WITHDRAWN
        escalation.decided_at = timezone.now()
        escalation.save(update_fields=["status", "decided_at"])
        announce_escalation(escalation, "escalation.withdrawn")


def announce_escalation(escalation: Escalation, name: EscalationChange) -> None:
    publish_many_on_commit(
        [
            (
                "escalations",
                EscalationChanged(
                    event=name,
                    escalation_id=escalation.pk,
                    status=escalation.status,
                    task_id=escalation.task_id,
                    kind=escalation.kind,
                ),
            )
        ]
    )
