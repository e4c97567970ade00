"""Who is told when an escalation waits: notification targets (a webhook or an email address
an admin adds), and each notification to send, with its attempts."""

from __future__ import annotations

from django.db import models

from .escalation import Escalation


class TargetKind(models.TextChoices):
    WEBHOOK = "webhook", "Webhook"
    EMAIL = "email", "Email"


class WebhookFormat(models.TextChoices):
    # Slack's incoming-webhook body, {"text": ...} (Mattermost, Teams workflows and others
    # take it too).
    SLACK = "slack", "Slack-compatible"
    # The escalation as JSON, signed with an HMAC of the body like push notifications.
    JSON = "json", "Signed JSON"


class NotificationTarget(models.Model):
    kind = models.CharField(max_length=8, choices=TargetKind)
    # A URL (webhook) or an email address. A webhook URL may hold a secret (Slack's do): it is
    # never logged, and pages show it shortened.
    address = models.CharField(max_length=2000)
    format = models.CharField(max_length=8, choices=WebhookFormat, blank=True)
    # The HMAC key of signed JSON webhooks (shown once, when the target is added).
    secret = models.CharField(max_length=128, blank=True)
    created_by_name = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_ok_at = models.DateTimeField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True)
    last_error_at = models.DateTimeField(null=True, blank=True)
    # Notifications given up on, after every retry failed.
    failures = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["pk"]

    def __str__(self) -> str:
        return f"{self.kind}:{self.shown_address}"

    @property
    def shown_address(self) -> str:
        """The address as pages show it: a URL without its path (where secrets live)."""
        if self.kind != TargetKind.WEBHOOK:
            return self.address
        scheme, _, rest = self.address.partition("://")
        host, _, path = rest.partition("/")
        return f"{scheme}://{host}/" + ("…" + path[-4:] if len(path) > 4 else path)


class NotifyEvent(models.TextChoices):
    ARRIVED = "arrived", "arrived"
    DUE_SOON = "due_soon", "nears its deadline"
    EXPIRED = "expired", "expired"
    TEST = "test", "test"


class NotificationState(models.TextChoices):
    PENDING = "pending", "Pending"
    SENT = "sent", "Sent"
    FAILED = "failed", "Failed"


class Notification(models.Model):
    """One message to one target about one escalation event; sent by a server process in the
    background (never on the routing path), retried with backoff until `max attempts`."""

    target = models.ForeignKey(
        NotificationTarget, on_delete=models.CASCADE, related_name="notifications"
    )
    escalation = models.ForeignKey(
        Escalation, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    event = models.CharField(max_length=16, choices=NotifyEvent)
    state = models.CharField(
        max_length=8, choices=NotificationState, default=NotificationState.PENDING
    )
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    last_error = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            # Each event is told once per target (the sweeper may look twice).
            models.UniqueConstraint(
                fields=["target", "escalation", "event"],
                condition=models.Q(escalation__isnull=False),
                name="notification_once",
            )
        ]
        indexes = [
            models.Index(
                fields=["next_attempt_at"],
                condition=models.Q(state="pending"),
                name="notification_due",
            )
        ]

    def __str__(self) -> str:
        return f"{self.event}#{self.escalation_id}->{self.target_id}"
