"""Who is told when an escalation waits: notification targets (a webhook or an email address
an admin adds), with their digest interval, routing rules and pass-on; each notification to
send, with its attempts (the pending ones are a target's next digest); and the one-time keys
of email links and Slack requests already used."""

from __future__ import annotations

from django.conf import settings
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
    # At most one message per this many seconds (None: HUB_NOTIFY_DIGEST_SECONDS); what
    # arrives in between waits, stored, for the next digest.
    digest_seconds = models.PositiveIntegerField(null=True, blank=True)
    # When this target may be sent its next message (a digest's interval after the last).
    next_send_at = models.DateTimeField(null=True, blank=True)
    # What it is told about: {"agents": [...], "pairs": ["caller:target"], "kinds": [...],
    # "priorities": [...], "skills": [...]}; a list left out or empty lets everything through.
    rules = models.JSONField(default=dict, blank=True)
    # Escalation when nobody answers: an item this target was told about and still undecided
    # `pass_after_seconds` later is passed on to `pass_to`.
    pass_to = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    pass_after_seconds = models.PositiveIntegerField(null=True, blank=True)
    # Email targets: the hub user its Approve/Reject links act as (they need that user's login).
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    class Meta:
        ordering = ["pk"]

    def __str__(self) -> str:
        return f"{self.kind}:{self.shown_address}"

    @property
    def how(self) -> str:
        """How this target is told, in words (its list row on pages and in the CLI)."""
        every = self.digest_seconds
        rules = "; ".join(f"{name} {', '.join(values)}" for name, values in self.rules.items())
        words = [
            f"digest every {every}s" if every is not None else "digest: the hub's interval",
            f"about {rules or 'everything'}",
        ]
        if self.pass_to_id and self.pass_after_seconds:
            after = self.pass_after_seconds
            wait = f"{after // 60} min" if after % 60 == 0 else f"{after}s"
            words.append(f"unanswered after {wait}: passed to {self.pass_to_id}")
        if self.user_id:
            words.append(f"links act as {self.user}")
        return ", ".join(words)

    @property
    def rule_texts(self) -> list[tuple[str, str]]:
        """Each routing rule's values, comma-separated (a form's fields)."""
        names = ("agents", "pairs", "kinds", "priorities", "skills")
        return [(name, ", ".join(self.rules.get(name, []))) for name in names]

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
    PASSED = "passed", "is still unanswered"
    TEST = "test", "test"


class NotificationState(models.TextChoices):
    PENDING = "pending", "Pending"
    SENT = "sent", "Sent"
    FAILED = "failed", "Failed"


class Notification(models.Model):
    """One escalation event to tell one target about; sent by a server process in the
    background (never on the routing path), alone or with the target's other pending ones in
    a digest (a pending row is what a digest will carry: nothing waits in memory), retried
    with backoff until `max attempts`."""

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


class NotifyKeyUse(models.Model):
    """A one-time key spent: an email link's nonce, or a Slack request's signature (a replay
    within Slack's five minutes is refused). Kept a day, then swept."""

    key = models.CharField(max_length=128, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.key
