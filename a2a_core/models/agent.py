"""Registered agents, their card history and their skills (indexed for discovery)."""

from __future__ import annotations

from django.db import models


class AgentStatus(models.TextChoices):
    ONLINE = "online", "Online"
    IDLE = "idle", "Idle"
    BUSY = "busy", "Busy"
    SUSPENDED = "suspended", "Suspended"
    OFFLINE = "offline", "Offline"


class DeliveryMode(models.TextChoices):
    # The agent runs its own A2A server; the hub forwards calls to it.
    ENDPOINT = "endpoint", "Endpoint"
    # The agent has no server; it holds a websocket (or long-polls) and the hub queues work for it.
    INBOX = "inbox", "Inbox"


class Scope(models.TextChoices):
    CALL = "a2a:call", "Call other agents"
    RECEIVE = "a2a:receive", "Be called"


DEFAULT_SCOPES = [Scope.CALL.value, Scope.RECEIVE.value]


class Agent(models.Model):
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    role = models.CharField(max_length=200, blank=True)
    description = models.TextField(blank=True)

    # The full A2A 1.0 agent card as registered (ProtoJSON, camelCase), and its version.
    card = models.JSONField()
    card_version = models.CharField(max_length=64)
    card_digest = models.CharField(max_length=64, help_text="SHA-256 of the canonical card JSON")

    status = models.CharField(max_length=16, choices=AgentStatus, default=AgentStatus.OFFLINE)
    status_reason = models.CharField(max_length=500, blank=True)
    delivery_mode = models.CharField(max_length=16, choices=DeliveryMode)
    # For endpoint agents: the interface the hub forwards to (chosen from the card).
    endpoint_url = models.URLField(max_length=500, blank=True)
    endpoint_binding = models.CharField(max_length=32, blank=True)

    # Bearer token: only its SHA-256 is stored; the prefix lets humans tell tokens apart.
    token_hash = models.CharField(max_length=64, unique=True, null=True, blank=True)
    token_prefix = models.CharField(max_length=16, blank=True)
    token_issued_at = models.DateTimeField(null=True, blank=True)
    scopes = models.JSONField(default=list)

    # For endpoint agents behind their own auth: the credential the hub calls the agent with,
    # sealed (`a2a_core.sealed`; never shown), the card's scheme it answers and its kind.
    credential_sealed = models.TextField(blank=True)
    credential_scheme = models.CharField(max_length=100, blank=True)
    credential_kind = models.CharField(max_length=16, blank=True)
    credential_set_at = models.DateTimeField(null=True, blank=True)
    credential_set_by = models.CharField(max_length=150, blank=True)
    # The agent's last refusal of the hub's credential (401/403, or no token to be had); cleared
    # when a call gets through again or the credential changes.
    auth_failure = models.CharField(max_length=500, blank=True)
    auth_failure_at = models.DateTimeField(null=True, blank=True)
    # Another hub, trusted to say who really called through it (`a2a_core.federation`).
    peer_hub = models.BooleanField(default=False)

    last_seen_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["slug"]
        indexes = [models.Index(fields=["status", "slug"], name="agent_status_slug")]

    def __str__(self) -> str:
        return self.slug

    @property
    def is_suspended(self) -> bool:
        return self.status == AgentStatus.SUSPENDED

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes


class AgentCardVersion(models.Model):
    """Every distinct card an agent has registered, newest last."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="card_versions")
    version = models.CharField(max_length=64)
    card = models.JSONField()
    digest = models.CharField(max_length=64)
    registered_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["agent", "registered_at"]
        constraints = [
            models.UniqueConstraint(fields=["agent", "version"], name="card_version_unique")
        ]

    def __str__(self) -> str:
        return f"{self.agent_id}@{self.version}"


class Skill(models.Model):
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="skills")
    skill_id = models.CharField(max_length=200)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    tags = models.JSONField(default=list)
    examples = models.JSONField(default=list)
    input_modes = models.JSONField(default=list)
    output_modes = models.JSONField(default=list)

    class Meta:
        ordering = ["agent", "skill_id"]
        constraints = [
            models.UniqueConstraint(fields=["agent", "skill_id"], name="skill_unique_per_agent")
        ]
        indexes = [models.Index(fields=["skill_id"], name="skill_id_idx")]

    def __str__(self) -> str:
        return f"{self.agent_id}:{self.skill_id}"


class SkillTag(models.Model):
    """One row per (skill, tag): discovery by tag is an index lookup, not a JSON scan."""

    skill = models.ForeignKey(Skill, on_delete=models.CASCADE, related_name="tag_rows")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    tag = models.CharField(max_length=100)

    class Meta:
        indexes = [models.Index(fields=["tag", "agent"], name="skilltag_tag_agent")]

    def __str__(self) -> str:
        return self.tag
