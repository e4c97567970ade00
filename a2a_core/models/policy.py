"""The policy: one validated document per version, exactly one active."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class PolicyVersion(models.Model):
    number = models.PositiveIntegerField(unique=True)
    document = models.JSONField()
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    # For changes made from the CLI or by the system, who made them in words.
    author_label = models.CharField(max_length=150, blank=True)
    reason = models.TextField()
    # Changes against the previous version: [{"op": "changed", "path": "...", "old": .., "new": ..}]
    diff = models.JSONField(default=list)
    is_active = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    activated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-number"]
        constraints = [
            models.UniqueConstraint(
                fields=["is_active"], condition=models.Q(is_active=True), name="one_active_policy"
            )
        ]

    def __str__(self) -> str:
        return f"policy v{self.number}"


class PolicyCounter(models.Model):
    """A rate-limit window count, when no Redis is configured (key e.g. `caller:alpha:m`)."""

    key = models.CharField(max_length=160)
    window = models.BigIntegerField(help_text="window start, seconds since the epoch")
    count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["key", "window"], name="policy_counter_window")
        ]

    def __str__(self) -> str:
        return f"{self.key}@{self.window}={self.count}"


class BreakerState(models.Model):
    """A target's circuit breaker, when no Redis is configured."""

    agent_slug = models.SlugField(max_length=64, unique=True)
    failures = models.PositiveIntegerField(default=0)
    # Open until this moment; after it the breaker is half-open.
    opened_until = models.DateTimeField(null=True, blank=True)
    # While half-open: the trial call in flight holds the probe until this moment.
    probe_until = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"breaker {self.agent_slug}"
