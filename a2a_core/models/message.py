"""Every message that crosses the hub, the policy's decision on it, and its deliveries."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from .agent import Agent
from .task import Task


class Direction(models.TextChoices):
    REQUEST = "request", "Caller to target"
    REPLY = "reply", "Target to caller"


class Decision(models.TextChoices):
    DELIVER = "deliver", "Delivered"
    HOLD = "hold", "Held for a human"
    REDIRECT = "redirect", "Redirected"
    REJECT = "reject", "Rejected"


class DeliveryState(models.TextChoices):
    PENDING = "pending", "Pending"
    QUEUED = "queued", "Queued for an offline agent"
    DELIVERED = "delivered", "Delivered"
    ACKED = "acked", "Acknowledged"
    HELD = "held", "Held"
    REJECTED = "rejected", "Rejected"
    FAILED = "failed", "Failed"
    EXPIRED = "expired", "Expired"


# A delivery an inbox agent has not acknowledged yet: queued, or sent and awaiting its ack.
WAITING_STATES = [DeliveryState.PENDING.value, DeliveryState.DELIVERED.value]


class Message(models.Model):
    # --- the A2A message -------------------------------------------------------------------
    message_id = models.CharField(max_length=128)
    role = models.CharField(max_length=8, choices=[("user", "User"), ("agent", "Agent")])
    parts = models.JSONField(default=list)
    metadata = models.JSONField(default=dict, blank=True)
    extensions = models.JSONField(default=list, blank=True)
    reference_task_ids = models.JSONField(default=list, blank=True)
    # Requests: what makes a retry the same message (`services.digest.message_digest`).
    digest = models.CharField(max_length=64, blank=True)
    # Requests: how many earlier copies of it (the same caller, messageId and digest) were
    # sent before and their tasks moved on, so that this copy is new work, not their retry
    # (`selectors.message_retries.message_earlier_copies`).
    repeat = models.PositiveSmallIntegerField(default=0)
    # The metadata of the SendMessageRequest that carried it: a delivery after an approval
    # or a redirect sends it on to the agent as the caller sent it.
    request_metadata = models.JSONField(default=dict, blank=True)

    # --- what the hub knows about it -------------------------------------------------------
    direction = models.CharField(max_length=8, choices=Direction, default=Direction.REQUEST)
    kind = models.CharField(max_length=32)
    envelope = models.JSONField(null=True, blank=True)
    summary = models.CharField(max_length=200, blank=True)
    # Foreign keys without their own index are covered by the composite indexes below.
    sender = models.ForeignKey(
        Agent,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="messages_sent",
        db_index=False,
    )
    # A human who spoke through the hub (an operator answering an escalation).
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, db_index=False
    )
    target = models.ForeignKey(
        Agent,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="messages_received",
        db_index=False,
    )
    recipients = models.JSONField(default=list, blank=True)
    task = models.ForeignKey(
        Task,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="messages",
        db_index=False,
    )
    # A reply that was an endpoint agent's direct answer (a Message, no task) to this request:
    # a retry of the request gets that Message back.
    in_reply_to = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="+", db_index=False
    )
    context_id = models.CharField(max_length=128, blank=True, db_index=True)
    correlation_id = models.CharField(max_length=128, blank=True, db_index=True)
    hop = models.PositiveSmallIntegerField(default=1)
    trace_id = models.CharField(max_length=32, blank=True)

    # --- the policy's decision (seed 000 `coordinatorAction`) ----------------------------
    decision = models.CharField(max_length=16, choices=Decision, default=Decision.DELIVER)
    decision_reason = models.CharField(max_length=64, blank=True)
    decision_detail = models.TextField(blank=True)
    decision_latency_us = models.PositiveIntegerField(null=True, blank=True)
    # The policy version that decided it (0: the default policy, none published yet; None: a
    # message recorded before versions were kept, or one no policy judged). A human's later
    # decision on a held message is the escalation's (`decided_by`).
    decision_policy_version = models.PositiveIntegerField(null=True, blank=True)
    redirected_to = models.ForeignKey(
        Agent, on_delete=models.SET_NULL, null=True, blank=True, related_name="+", db_index=False
    )
    # What the policy's content rules found (rule, kind, where, span; never the matched
    # text): `parts` is stored with each finding masked.
    content_findings = models.JSONField(null=True, blank=True)
    # A message a content rule held: its original parts, sealed (`a2a_core.sealed`), for the
    # human who may approve it; delivered only then.
    sealed_parts = models.TextField(blank=True, default="")

    delivery_state = models.CharField(
        max_length=16, choices=DeliveryState, default=DeliveryState.PENDING
    )
    # Request messages: when an answer (reply or end of task) came back, and how long it took.
    responded_at = models.DateTimeField(null=True, blank=True)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    # A response that arrived after its request's deadline: recorded, flagged, never dropped.
    late = models.BooleanField(default=False)
    # Requests: when the call passed each point of its way through the hub (received,
    # judged, committed, delivered, answered, recorded), in microseconds from `created_at`
    # (`a2a_core.call_times`); written with the answer, on the call paths that measure it.
    call_times = models.JSONField(null=True, blank=True)

    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            # A retry (same caller, messageId, target and content: the digest) is the same
            # message — unless the policy refused the first attempt: then the retry is judged
            # (and recorded) anew, or the first one's task has moved on: then it is the next
            # `repeat`. A reused messageId with anything else is a new message.
            models.UniqueConstraint(
                fields=["sender", "message_id", "digest", "repeat"],
                condition=models.Q(direction="request", sender__isnull=False)
                & ~models.Q(decision="reject"),
                name="message_idempotent_per_sender",
            )
        ]
        indexes = [
            models.Index(fields=["-created_at", "-id"], name="msg_created"),
            models.Index(fields=["sender", "-created_at"], name="msg_sender_created"),
            models.Index(fields=["target", "-created_at"], name="msg_target_created"),
            models.Index(fields=["kind", "-created_at"], name="msg_kind_created"),
            models.Index(fields=["decision", "-created_at"], name="msg_decision_created"),
            models.Index(fields=["decision_reason", "-created_at"], name="msg_reason_created"),
            models.Index(fields=["task", "created_at"], name="msg_task_created"),
            # The outbox's queue: small, so a partial index keeps polling it cheap.
            models.Index(
                fields=["delivery_state"],
                condition=models.Q(delivery_state="queued"),
                name="msg_queued",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind}:{self.message_id}"


class Delivery(models.Model):
    """One recipient's copy of a message: every message to an inbox agent, and each recipient
    of a fan-out (broadcast, knowledge share). Sent until acknowledged (at-least-once)."""

    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="deliveries")
    recipient = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="deliveries")
    task = models.ForeignKey(
        Task, on_delete=models.CASCADE, null=True, blank=True, related_name="deliveries"
    )
    state = models.CharField(max_length=16, choices=DeliveryState, default=DeliveryState.PENDING)
    decision = models.CharField(max_length=16, choices=Decision, default=Decision.DELIVER)
    decision_reason = models.CharField(max_length=64, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    # A fan-out copy for an endpoint agent: when the hub tries (again) to send it.
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    acked_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["message", "recipient"], name="delivery_unique")
        ]
        indexes = [
            models.Index(fields=["recipient", "state", "created_at"], name="delivery_inbox"),
            models.Index(fields=["state", "next_attempt_at"], name="delivery_due"),
        ]

    def __str__(self) -> str:
        return f"{self.message_id}->{self.recipient_id}"
