"""The agent registry: register from a card, re-register, suspend/resume, tokens, delete.

Suspending an agent, rotating its token or deleting it ends its open inbox sessions
(websockets and waiting long-polls) on every worker at once: each process hears the change's
`agent.*` event (see `a2a_core.inbox.access`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from a2a_core import agent_cache
from a2a_core.errors import Conflict, FieldProblem, ValidationFailed
from a2a_core.events import publish_many_on_commit
from a2a_core.models import (
    DEFAULT_SCOPES,
    Agent,
    AgentCardVersion,
    AgentStatus,
    DeliveryMode,
    Scope,
    Skill,
    SkillTag,
)
from a2a_core.schemas.card import SUPPORTED_BINDINGS, CheckedCard, check_card
from a2a_core.schemas.events import AgentChange, AgentChanged, Event
from a2a_core.services.audit import audit_record
from a2a_core.services.card_signatures import card_signatures_check
from a2a_core.tokens import new_token, token_hash, token_prefix

SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
# /a2a/rest/ is the hub's own REST endpoint.
RESERVED_SLUGS = frozenset({"rest"})
VALID_SCOPES = {s.value for s in Scope}


@dataclass(frozen=True)
class Registration:
    agent: Agent
    # The bearer token, present only when one was issued by this call (shown once).
    token: str | None
    created: bool
    changed: bool
    converted_from: str | None = None
    # For a signed card: which key verified it, or why its signatures were not checked.
    signature: str | None = None


def _clean_slug(slug: str | None, card_name: str) -> str:
    value = slug if slug is not None else slugify(card_name)
    if value in RESERVED_SLUGS:
        raise ValidationFailed(
            "invalid agent slug",
            [FieldProblem("slug", f"{value!r} is reserved by the hub; choose another with --slug")],
        )
    if not SLUG_RE.match(value):
        raise ValidationFailed(
            "invalid agent slug",
            [
                FieldProblem(
                    "slug",
                    f"{value!r} must be 1-64 lowercase letters, digits, '-' or '_', "
                    "starting with a letter or digit",
                )
            ],
        )
    return value


def _clean_scopes(scopes: list[str] | None) -> list[str]:
    if scopes is None:
        return list(DEFAULT_SCOPES)
    unknown = sorted(set(scopes) - VALID_SCOPES)
    if unknown:
        raise ValidationFailed(
            "invalid scopes",
            [FieldProblem("scopes", f"unknown scope(s) {unknown}; valid: {sorted(VALID_SCOPES)}")],
        )
    return sorted(set(scopes))


def _delivery_mode(requested: str | None, card_data: Any) -> str:
    if requested is not None:
        if requested not in DeliveryMode.values:
            raise ValidationFailed(
                "invalid delivery mode",
                [FieldProblem("deliveryMode", f"must be one of {DeliveryMode.values}")],
            )
        return requested
    has_interfaces = isinstance(card_data, dict) and bool(card_data.get("supportedInterfaces"))
    has_url = isinstance(card_data, dict) and bool(card_data.get("url"))
    return DeliveryMode.ENDPOINT if has_interfaces or has_url else DeliveryMode.INBOX


def _endpoint(checked: CheckedCard) -> tuple[str, str]:
    """The interface the hub forwards to: the first one (the agent's preferred) it can speak."""
    for iface in checked.card.supported_interfaces:
        if iface.protocol_binding in SUPPORTED_BINDINGS:
            return iface.url, iface.protocol_binding
    return "", ""


def _sync_skills(agent: Agent, checked: CheckedCard) -> None:
    agent.skills.all().delete()
    for skill in checked.card.skills:
        row = Skill.objects.create(
            agent=agent,
            skill_id=skill.id,
            name=skill.name,
            description=skill.description,
            tags=list(skill.tags),
            examples=list(skill.examples),
            input_modes=list(skill.input_modes) or list(checked.card.default_input_modes),
            output_modes=list(skill.output_modes) or list(checked.card.default_output_modes),
        )
        SkillTag.objects.bulk_create(
            SkillTag(skill=row, agent=agent, tag=tag.lower()) for tag in set(skill.tags)
        )


def _issue_token(agent: Agent) -> str:
    token = new_token()
    agent.token_hash = token_hash(token)
    agent.token_prefix = token_prefix(token)
    agent.token_issued_at = timezone.now()
    return token


def _agent_event(name: AgentChange, agent: Agent) -> list[tuple[str, Event]]:
    """The events announcing a change to an agent. This process forgets its cached copy at
    commit; other processes when the event reaches them."""
    agent_id, slug = agent.pk, agent.slug
    transaction.on_commit(lambda: agent_cache.forget(agent_id=agent_id, slug=slug))
    payload = AgentChanged(event=name, agent_id=agent_id, slug=slug, status=agent.status)
    return [(f"agent.{agent_id}", payload), ("agents", payload)]


@transaction.atomic
def agent_register(
    *,
    card: Any,
    slug: str | None = None,
    role: str | None = None,
    delivery_mode: str | None = None,
    scopes: list[str] | None = None,
    actor: User | None = None,
    actor_label: str = "",
) -> Registration:
    """Register an agent from its A2A agent card, or re-register it with a newer card.

    Idempotent: the same card again changes nothing and issues no token. A changed card must
    carry a version this agent has not registered before; each version is kept. The bearer
    token is issued only when the agent is first created (rotate it with
    `agent_token_rotate`). Raises `ValidationFailed` listing every problem with the card, a
    signed card whose signatures do not verify included (`card_signatures_check`).
    """
    mode = _delivery_mode(delivery_mode, card)
    checked = check_card(card, needs_endpoint=mode == DeliveryMode.ENDPOINT)
    signature = card_signatures_check(
        card=checked.card, legacy=card if checked.converted_from else None
    )
    agent_slug = _clean_slug(slug, checked.card.name)
    clean_scopes = _clean_scopes(scopes) if scopes is not None else None
    endpoint_url, endpoint_binding = _endpoint(checked)

    # A new agent takes its settings from the arguments (defaults for those not given) and
    # gets a token; an existing one changes only the settings given, and its card only when
    # the card changed, to a version it has not registered before. Storing the card, its
    # skills, the audit entry and the event are the same for both.
    agent = Agent.objects.select_for_update().filter(slug=agent_slug).first()
    token = None
    if agent is None:
        is_endpoint = mode == DeliveryMode.ENDPOINT
        agent = Agent(
            slug=agent_slug,
            role=role or "",
            delivery_mode=mode,
            endpoint_url=endpoint_url if is_endpoint else "",
            endpoint_binding=endpoint_binding if is_endpoint else "",
            scopes=clean_scopes or list(DEFAULT_SCOPES),
            status=AgentStatus.ONLINE if is_endpoint else AgentStatus.OFFLINE,
        )
        token = _issue_token(agent)
        new_version = True
    else:
        settings_changed = _settings_update(
            agent,
            role=role,
            delivery_mode=delivery_mode and mode,
            scopes=clean_scopes,
            endpoint=(endpoint_url, endpoint_binding),
        )
        if checked.digest == agent.card_digest:
            if settings_changed:
                agent.save()
            return Registration(
                agent, None, False, settings_changed, checked.converted_from, signature
            )
        previous = AgentCardVersion.objects.filter(
            agent=agent, version=checked.card.version
        ).first()
        if previous is not None and previous.digest != checked.digest:
            raise Conflict(
                f"{agent.slug}: card version {checked.card.version!r} is already registered "
                "with different content; bump the card's `version` to register a change"
            )
        new_version = previous is None
    old_version = agent.card_version
    agent.name = checked.card.name
    agent.description = checked.card.description
    agent.card = checked.data
    agent.card_version = checked.card.version
    agent.card_digest = checked.digest
    agent.save()
    if new_version:
        AgentCardVersion.objects.create(
            agent=agent, version=checked.card.version, card=checked.data, digest=checked.digest
        )
    _sync_skills(agent, checked)
    created = token is not None
    audit_record(
        action="agent.register" if created else "agent.update",
        summary=f"registered {agent.slug} ({mode}, card v{agent.card_version})"
        if created
        else f"re-registered {agent.slug}: card v{old_version} -> v{agent.card_version}",
        actor=actor,
        actor_label=actor_label,
        agent=agent,
        object_type="agent",
        object_id=agent.slug,
    )
    publish_many_on_commit(_agent_event("agent.registered" if created else "agent.updated", agent))
    return Registration(agent, token, created, True, checked.converted_from, signature)


def _settings_update(
    agent: Agent,
    *,
    role: str | None,
    delivery_mode: str | None,
    scopes: list[str] | None,
    endpoint: tuple[str, str],
) -> bool:
    """Apply the settings given (None or empty: keep the agent's) and the card's endpoint
    (none for an inbox agent) to an existing agent, unsaved. True when any changed."""
    changed = False
    for field, value in (("role", role), ("delivery_mode", delivery_mode), ("scopes", scopes)):
        if value is not None and value and getattr(agent, field) != value:
            setattr(agent, field, value)
            changed = True
    wanted = endpoint if agent.delivery_mode == DeliveryMode.ENDPOINT else ("", "")
    if (agent.endpoint_url, agent.endpoint_binding) != wanted:
        agent.endpoint_url, agent.endpoint_binding = wanted
        changed = True
    return changed


@transaction.atomic
def agent_suspend(
    *,
    agent: Agent,
    reason: str = "",
    actor: User | None = None,
    actor_label: str = "",
) -> bool:
    """Suspend an agent: the policy stops routing to and from it, its other calls (reads,
    cancels, push configs) are refused, and its inbox sessions end; work queued for it waits
    for `agent_resume` (or fails when its deadline passes first). Returns False if it
    already was suspended (nothing changes)."""
    agent = Agent.objects.select_for_update().get(pk=agent.pk)
    if agent.status == AgentStatus.SUSPENDED:
        return False
    agent.status = AgentStatus.SUSPENDED
    agent.status_reason = reason
    agent.save(update_fields=["status", "status_reason", "updated_at"])
    audit_record(
        action="agent.suspend",
        summary=f"suspended {agent.slug}" + (f": {reason}" if reason else ""),
        actor=actor,
        actor_label=actor_label,
        agent=agent,
        object_type="agent",
        object_id=agent.slug,
    )
    publish_many_on_commit(_agent_event("agent.status", agent))
    return True


@transaction.atomic
def agent_resume(*, agent: Agent, actor: User | None = None, actor_label: str = "") -> bool:
    """Lift a suspension: an inbox agent can connect again and gets the work that waited.
    Returns False if the agent was not suspended."""
    agent = Agent.objects.select_for_update().get(pk=agent.pk)
    if agent.status != AgentStatus.SUSPENDED:
        return False
    # An inbox agent is online again only once it reconnects.
    agent.status = (
        AgentStatus.ONLINE if agent.delivery_mode == DeliveryMode.ENDPOINT else AgentStatus.OFFLINE
    )
    agent.status_reason = ""
    agent.save(update_fields=["status", "status_reason", "updated_at"])
    audit_record(
        action="agent.resume",
        summary=f"resumed {agent.slug}",
        actor=actor,
        actor_label=actor_label,
        agent=agent,
        object_type="agent",
        object_id=agent.slug,
    )
    publish_many_on_commit(_agent_event("agent.status", agent))
    return True


@transaction.atomic
def agent_token_rotate(*, agent: Agent, actor: User | None = None, actor_label: str = "") -> str:
    """Issue a new bearer token; the old one stops working at once, and sessions opened with
    it end. Returns the new token (the only time it is ever shown)."""
    agent = Agent.objects.select_for_update().get(pk=agent.pk)
    token = _issue_token(agent)
    agent.save(update_fields=["token_hash", "token_prefix", "token_issued_at", "updated_at"])
    audit_record(
        action="agent.token_rotate",
        summary=f"rotated the token of {agent.slug} (now {agent.token_prefix}…)",
        actor=actor,
        actor_label=actor_label,
        agent=agent,
        object_type="agent",
        object_id=agent.slug,
    )
    publish_many_on_commit(_agent_event("agent.token_rotated", agent))
    return token


@transaction.atomic
def agent_delete(*, agent: Agent, actor: User | None = None, actor_label: str = "") -> None:
    """Delete an agent that has no traffic recorded (the database refuses otherwise, with
    `ProtectedError`); its token stops working and its inbox sessions end."""
    agent = Agent.objects.select_for_update().get(pk=agent.pk)
    audit_record(
        action="agent.delete",
        summary=f"deleted {agent.slug}",
        actor=actor,
        actor_label=actor_label,
        agent=None,
        object_type="agent",
        object_id=agent.slug,
    )
    publish_many_on_commit(_agent_event("agent.deleted", agent))
    agent.delete()


def agent_set_presence(*, agent_id: int, status: str) -> None:
    """Record that an agent was seen (and its presence), unless a human suspended it."""
    now = timezone.now()
    updated = (
        Agent.objects.filter(pk=agent_id)
        .exclude(status=AgentStatus.SUSPENDED)
        .update(status=status, last_seen_at=now, updated_at=now)
    )
    if updated:
        agent = Agent.objects.only("pk", "slug", "status").get(pk=agent_id)
        publish_many_on_commit(_agent_event("agent.status", agent))
