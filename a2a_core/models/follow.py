"""Endpoint agents' tasks the hub follows to the end the agent gives them."""

from __future__ import annotations

from django.db import models

from .task import Task


class TaskFollow(models.Model):
    """An endpoint agent's task whose outcome the hub still has to learn from the agent: it
    answered with a task still submitted or working, or the process delivering it stopped.

    One server process follows it at a time: `claim` holds that process's mark and
    `lease_until` the end of its lease, renewed while it follows. A row whose lease has run
    out (its process stopped) is taken by another process, which resumes. The row goes when
    the task has ended (or needs input) at the hub.
    """

    task = models.OneToOneField(
        Task, on_delete=models.CASCADE, primary_key=True, related_name="follow"
    )
    claim = models.CharField(max_length=32, blank=True)
    lease_until = models.DateTimeField(db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.task_id} ({self.claim or 'unclaimed'})"
