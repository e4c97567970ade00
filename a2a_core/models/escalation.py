"""Questions and held messages that wait for a human decision."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from .agent import Agent
from .message import Message
from .task import Task


class EscalationKind(models.TextChoices):
    # An agent moved its task to input-required: a human answers it.
    INPUT_REQUIRED = "input_required", "Input required"
    # The policy held a message: a human approves, edits, redirects or rejects it.
    APPROVAL = "approval", "Approval"


class EscalationStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    ANSWERED = "answered", "Answered"
    APPROVED = "approved", "Approved"
    REDIRECTED = "redirected", "Redirected"
    REJECTED = "rejected", "Rejected"
    EXPIRED = "expired", "Expired"
    WITHDRAWN = "withdrawn", "Withdrawn"


class Priority(models.TextChoices):
    LOW = "low", "Low"
    NORMAL = "normal", "Normal"
    HIGH = "high", "High"
    URGENT = "urgent", "Urgent"


PRIORITY_RANK = {Priority.LOW: 0, Priority.NORMAL: 1, Priority.HIGH: 2, Priority.URGENT: 3}


class Escalation(models.Model):
    kind = models.CharField(max_length=16, choices=EscalationKind)
    status = models.CharField(
        max_length=16, choices=EscalationStatus, default=EscalationStatus.PENDING
    )
    priority = models.CharField(max_length=8, choices=Priority, default=Priority.NORMAL)
    priority_rank = models.PositiveSmallIntegerField(default=1)
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="escalations")
    message = models.ForeignKey(
        Message, on_delete=models.CASCADE, null=True, blank=True, related_name="escalations"
    )
    # Who asks (the agent in input-required, or the caller whose message was held).
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="escalations")
    question = models.TextField(blank=True)
    reason = models.CharField(max_length=500, blank=True)
    # JSON Schema of a structured answer, when the agent declared one.
    answer_schema = models.JSONField(null=True, blank=True)
    # The answers an agent offered with its question (quick replies).
    options = models.JSONField(default=list, blank=True)
    deadline = models.DateTimeField(null=True, blank=True)
    timeout_outcome = models.CharField(max_length=16, default="reject")

    answer = models.TextField(blank=True)
    answer_data = models.JSONField(null=True, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    # Who decided, by name: the user's name, or the person a CLI command ran for.
    decided_by_name = models.CharField(max_length=150, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    # "I'm on it": the person working on it now (anyone may release it or take it over).
    claimed_by_name = models.CharField(max_length=150, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    # Held messages with the same caller, target and content share it: the inbox folds them.
    fingerprint = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-priority_rank", "-created_at"]
        indexes = [
            models.Index(
                fields=["status", "-priority_rank", "-created_at"], name="escalation_inbox"
            ),
            models.Index(fields=["status", "deadline"], name="escalation_deadline"),
            models.Index(fields=["status", "fingerprint"], name="escalation_fold"),
        ]

    def __str__(self) -> str:
        return f"{self.kind}#{self.pk}"

    @property
    def is_open(self) -> bool:
        return self.status == EscalationStatus.PENDING

    @property
    def decider(self) -> str:
        """Who decided, by name ("the hub" for decisions no person made)."""
        if self.decided_by_name:
            return self.decided_by_name
        return self.decided_by.get_username() if self.decided_by else "the hub"
