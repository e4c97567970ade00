"""Django admin registrations: a raw view of every table for administrators."""

from django.contrib import admin
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest

from a2a_core import models


def _user(request: HttpRequest) -> User | None:
    return request.user if isinstance(request.user, User) else None


# A card, and what is read from it, changes only through registration (`a2a register`),
# which checks it (its signatures included): the admin shows it and cannot add or edit one.
CARD_FIELDS = [
    "name",
    "description",
    "card",
    "card_version",
    "card_digest",
    "endpoint_url",
    "endpoint_binding",
]


@admin.register(models.Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "status", "delivery_mode", "card_version", "last_seen_at"]
    list_filter = ["status", "delivery_mode"]
    search_fields = ["slug", "name", "description"]
    readonly_fields = [
        "token_hash",
        "token_prefix",
        "token_issued_at",
        *CARD_FIELDS,
        "credential_scheme",
        "credential_kind",
        "credential_set_at",
        "credential_set_by",
        "auth_failure",
        "auth_failure_at",
    ]
    # The sealed credential is never shown, not even sealed: `a2a agent credentials` sets it.
    exclude = ["credential_sealed"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    # Deleting goes through the service, which ends the agent's open inbox sessions. (Imported
    # when used: the admin is loaded by every manage.py command, the service's imports are
    # 0.9 s of a start.)
    def delete_model(self, request: HttpRequest, obj: models.Agent) -> None:
        from a2a_core.services.agents import agent_delete

        agent_delete(agent=obj, actor=_user(request))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[models.Agent]) -> None:
        from a2a_core.services.agents import agent_delete

        with transaction.atomic():
            for agent in queryset:
                agent_delete(agent=agent, actor=_user(request))


@admin.register(models.AgentCardVersion)
class AgentCardVersionAdmin(admin.ModelAdmin):
    list_display = ["agent", "version", "registered_at"]
    list_select_related = ["agent"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(models.Skill)
class SkillAdmin(admin.ModelAdmin):
    list_display = ["skill_id", "name", "agent"]
    search_fields = ["skill_id", "name", "description"]
    list_select_related = ["agent"]


@admin.register(models.Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = ["id", "state", "caller", "target", "depth", "status_timestamp"]
    list_filter = ["state"]
    search_fields = ["id", "context_id", "trace_id"]
    raw_id_fields = ["parent", "root", "caller", "target"]


@admin.register(models.TaskEvent)
class TaskEventAdmin(admin.ModelAdmin):
    list_display = ["task", "seq", "kind", "state", "created_at"]
    raw_id_fields = ["task"]


@admin.register(models.Artifact)
class ArtifactAdmin(admin.ModelAdmin):
    list_display = ["artifact_id", "name", "task", "complete"]
    raw_id_fields = ["task"]


@admin.register(models.Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = ["message_id", "kind", "sender", "target", "decision", "created_at"]
    list_filter = ["kind", "decision", "direction"]
    search_fields = ["message_id", "summary", "correlation_id", "trace_id"]
    raw_id_fields = ["task", "sender", "target", "redirected_to"]


@admin.register(models.Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    list_display = ["message", "recipient", "state", "attempts", "acked_at"]
    list_filter = ["state"]
    raw_id_fields = ["message", "recipient", "task"]


@admin.register(models.Escalation)
class EscalationAdmin(admin.ModelAdmin):
    list_display = ["pk", "kind", "status", "priority", "agent", "deadline", "created_at"]
    list_filter = ["kind", "status", "priority"]
    raw_id_fields = ["task", "message", "agent"]


@admin.register(models.PolicyVersion)
class PolicyVersionAdmin(admin.ModelAdmin):
    list_display = ["number", "is_active", "author", "author_label", "created_at"]


@admin.register(models.PushNotificationConfig)
class PushNotificationConfigAdmin(admin.ModelAdmin):
    list_display = [
        "config_id",
        "task",
        "owner",
        "url",
        "delivered_seq",
        "attempts",
        "undelivered",
        "last_status",
        "last_error",
    ]
    raw_id_fields = ["task", "owner"]
    exclude = ["token"]  # the owner's secret: shown to it over A2A only


@admin.register(models.AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    list_display = ["created_at", "action", "actor", "actor_label", "summary"]
    list_filter = ["action"]
    search_fields = ["summary", "object_id"]
