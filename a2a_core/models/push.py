"""A2A push notification configs: where the hub POSTs a task's events for the agent that asked,
and how far delivery has got."""

from __future__ import annotations

import uuid

from django.db import models
from django.utils import timezone

from .agent import Agent
from .task import Task


class PushNotificationConfig(models.Model):
    """One webhook for one task, owned by the agent that created it (only it can read, list or
    delete it). Every event of the task's log is POSTed to `url` in order, with `token` (when
    there is one) and a signature keyed by it.

    Delivery progress is kept here so it survives restarts: `delivered_seq` is the last event
    handled (delivered, or given up on after the last attempt); `attempts` counts the failed
    tries at the next one. `next_attempt_at` is when a worker may take the row next (None: the
    task has ended and everything is handled); while a worker sends, `claim` holds its mark and
    `next_attempt_at` the end of its lease.
    """

    config_id = models.CharField(max_length=128, default=uuid.uuid4)
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="push_configs")
    owner = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="push_configs")
    url = models.URLField(max_length=1000)
    # Optional (A2A spec): sent as X-A2A-Notification-Token, the HMAC key of X-A2A-Signature.
    token = models.CharField(max_length=500, blank=True)
    auth_scheme = models.CharField(max_length=64, blank=True)
    auth_credentials = models.CharField(max_length=1000, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    delivered_seq = models.PositiveIntegerField(default=0)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True, default=timezone.now)
    claim = models.CharField(max_length=32, blank=True)
    # HTTP status of the last attempt (None: no answer, e.g. refused or timed out).
    last_status = models.PositiveSmallIntegerField(null=True, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    last_error_at = models.DateTimeField(null=True, blank=True)
    # Events given up on after the last attempt.
    undelivered = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["task", "owner", "config_id"], name="push_config_unique"
            )
        ]
        indexes = [models.Index(fields=["next_attempt_at"], name="push_config_due")]

    def __str__(self) -> str:
        return f"{self.task_id}/{self.config_id}"
