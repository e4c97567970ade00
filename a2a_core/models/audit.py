"""Human and system actions worth keeping: logins, policy edits, decisions on escalations."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from .agent import Agent


class AuditEvent(models.Model):
    action = models.CharField(max_length=64, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    # "cli", "system", or an agent slug when no human acted.
    actor_label = models.CharField(max_length=150, blank=True)
    agent = models.ForeignKey(
        Agent, on_delete=models.SET_NULL, null=True, blank=True, related_name="audit_events"
    )
    object_type = models.CharField(max_length=32, blank=True)
    object_id = models.CharField(max_length=128, blank=True)
    summary = models.CharField(max_length=500, blank=True)
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["-created_at", "-id"], name="audit_created"),
            models.Index(fields=["object_type", "object_id"], name="audit_object"),
        ]

    def __str__(self) -> str:
        return f"{self.action} {self.object_type}:{self.object_id}"
