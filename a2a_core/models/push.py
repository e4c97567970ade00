"""A2A push notification configs: where the hub POSTs a caller's task updates."""

from __future__ import annotations

import uuid

from django.db import models

from .agent import Agent
from .task import Task


class PushNotificationConfig(models.Model):
    config_id = models.CharField(max_length=128, default=uuid.uuid4)
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="push_configs")
    owner = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="push_configs")
    url = models.URLField(max_length=1000)
    token = models.CharField(max_length=500, blank=True)
    auth_scheme = models.CharField(max_length=64, blank=True)
    auth_credentials = models.CharField(max_length=1000, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]
        constraints = [
            models.UniqueConstraint(fields=["task", "config_id"], name="push_config_unique")
        ]

    def __str__(self) -> str:
        return f"{self.task_id}/{self.config_id}"
