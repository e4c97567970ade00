"""Live connections of inbox agents: an agent is online while it has one."""

from __future__ import annotations

from django.db import models

from .agent import Agent


class Transport(models.TextChoices):
    WEBSOCKET = "websocket", "WebSocket"
    POLL = "poll", "HTTP long-poll"


class InboxSession(models.Model):
    """One websocket of an inbox agent, or its long-poll client while it keeps polling.

    Rows are removed when the connection closes; a server process that dies leaves its rows
    behind, and the sweeper removes any not seen for a while (see `a2a_core.inbox.sessions`).
    """

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="inbox_sessions")
    # The Channels channel name of a websocket; "poll:<agent id>" for the long-poll client.
    channel = models.CharField(max_length=200, unique=True)
    transport = models.CharField(max_length=16, choices=Transport)
    connected_at = models.DateTimeField(auto_now_add=True)
    seen_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["seen_at"], name="inbox_session_seen")]

    def __str__(self) -> str:
        return f"{self.agent_id}:{self.channel}"
