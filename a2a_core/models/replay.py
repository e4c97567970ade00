"""Replay sets: recorded tasks' inputs sent again, through the hub, to another agent or to the
same agent after a change, each answer kept beside the one recorded."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from .agent import Agent
from .task import Task


class ReplayStatus(models.TextChoices):
    NEW = "new", "Not run yet"
    RUNNING = "running", "Running"
    DONE = "done", "Done"


class ReplaySet(models.Model):
    """Which tasks are replayed, as whom and to whom; run again at will (`runs` counts)."""

    name = models.CharField(max_length=200, blank=True)
    # The agent the replays are sent as: its own rate windows, its own place in the policy.
    caller = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="+")
    # Where each input goes; None: to the agent that answered it the first time.
    target = models.ForeignKey(
        Agent, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    # What the set was made from, in words (a filtered view's query, or a task id).
    source = models.CharField(max_length=1000, blank=True)
    status = models.CharField(max_length=16, choices=ReplayStatus, default=ReplayStatus.NEW)
    runs = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)  # items of the current run done so far
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    created_at = models.DateTimeField(auto_now_add=True)
    run_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.name or f"replay {self.pk}"


class ReplayItem(models.Model):
    """One recorded task of a set: its input and recorded answer, copied when the set was
    made (the original task is never changed), and the answer of the latest run."""

    replay_set = models.ForeignKey(ReplaySet, on_delete=models.CASCADE, related_name="items")
    position = models.PositiveIntegerField()
    original = models.ForeignKey(Task, on_delete=models.SET_NULL, null=True, related_name="+")
    original_target = models.CharField(max_length=100)
    # The first request's parts, metadata (without the hub's key) and extensions.
    input = models.JSONField()
    # {state, text, artifacts: [{name, text}], durationMs}: as recorded, and as replayed.
    expected = models.JSONField()
    actual = models.JSONField(null=True, blank=True)
    # done | refused (by the hub's policy) | failed (the call did not get through)
    outcome = models.CharField(max_length=16, blank=True)
    reason = models.TextField(blank=True)
    replay_task = models.ForeignKey(
        Task, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    class Meta:
        ordering = ["replay_set", "position"]
        constraints = [
            models.UniqueConstraint(fields=["replay_set", "position"], name="replay_item_position")
        ]

    def __str__(self) -> str:
        return f"{self.replay_set_id}#{self.position}"
