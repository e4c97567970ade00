"""Outbound credentials: what the hub calls an endpoint agent with when its card declares
`securitySchemes`. Set and cleared by an admin; sealed at rest (`a2a_core.sealed`), never
shown again: pages, exports, events and the audit log say only which scheme is set, when and
by whom. Every worker uses a new credential within `agent_cache.TTL` of its commit.
"""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from a2a_core.errors import ValidationFailed
from a2a_core.events import publish_many_on_commit
from a2a_core.models import Agent, DeliveryMode
from a2a_core.schemas.credentials import credential_for_card
from a2a_core.sealed import seal
from a2a_core.services.agents import _agent_event
from a2a_core.services.audit import audit_record

MAX_FAILURE = 500


@transaction.atomic
def agent_credentials_set(
    *,
    agent: Agent,
    scheme: str | None = None,
    secret: str,
    client_id: str = "",
    token_url: str = "",
    scopes: list[str] | None = None,
    actor: User | None = None,
    actor_label: str = "",
) -> Agent:
    """Seal and keep the credential for the card's scheme `scheme` (its only one when None),
    replacing any before it; the agent's last auth failure is forgotten. Raises
    ValidationFailed (never quoting the secret) when the card or the input does not fit."""
    agent = Agent.objects.select_for_update().get(pk=agent.pk)
    if agent.delivery_mode != DeliveryMode.ENDPOINT:
        raise ValidationFailed(
            f"{agent.slug} is an inbox agent: the hub never calls it, so it needs no credential"
        )
    credential = credential_for_card(
        agent.card,
        scheme=scheme,
        secret=secret,
        client_id=client_id,
        token_url=token_url,
        scopes=scopes,
    )
    agent.credential_sealed = seal(credential.sealable())
    agent.credential_scheme = credential.scheme
    agent.credential_kind = credential.kind
    agent.credential_set_at = timezone.now()
    agent.credential_set_by = (actor.get_username() if actor else actor_label)[:150]
    agent.auth_failure, agent.auth_failure_at = "", None
    agent.save(update_fields=[*_FIELDS, "updated_at"])
    audit_record(
        action="agent.credentials_set",
        summary=f"set the credential {agent.slug} is called with: {credential.described}",
        actor=actor,
        actor_label=actor_label,
        agent=agent,
        object_type="agent",
        object_id=agent.slug,
        data={"scheme": credential.scheme, "kind": credential.kind},
    )
    publish_many_on_commit(_agent_event("agent.credentials", agent))
    return agent


@transaction.atomic
def agent_credentials_clear(
    *, agent: Agent, actor: User | None = None, actor_label: str = ""
) -> bool:
    """Forget the agent's credential: the hub calls it without one. False if none was set."""
    agent = Agent.objects.select_for_update().get(pk=agent.pk)
    if not agent.credential_sealed:
        return False
    scheme = agent.credential_scheme
    agent.credential_sealed = agent.credential_scheme = agent.credential_kind = ""
    agent.credential_set_at, agent.credential_set_by = None, ""
    agent.auth_failure, agent.auth_failure_at = "", None
    agent.save(update_fields=[*_FIELDS, "updated_at"])
    audit_record(
        action="agent.credentials_clear",
        summary=f"cleared the credential {agent.slug} was called with ({scheme})",
        actor=actor,
        actor_label=actor_label,
        agent=agent,
        object_type="agent",
        object_id=agent.slug,
    )
    publish_many_on_commit(_agent_event("agent.credentials", agent))
    return True


_FIELDS = [
    "credential_sealed",
    "credential_scheme",
    "credential_kind",
    "credential_set_at",
    "credential_set_by",
    "auth_failure",
    "auth_failure_at",
]


@transaction.atomic
def agent_auth_failure_record(*, agent_id: int, failure: str) -> None:
    """Note that the agent refused the hub's credential (`failure`, which never holds the
    secret), or, with `failure` empty, that a call got through again. Writes only a change."""
    agent = Agent.objects.select_for_update().filter(pk=agent_id).first()
    if agent is None or agent.auth_failure == failure[:MAX_FAILURE]:
        return
    agent.auth_failure = failure[:MAX_FAILURE]
    agent.auth_failure_at = timezone.now() if failure else None
    agent.save(update_fields=["auth_failure", "auth_failure_at", "updated_at"])
    publish_many_on_commit(_agent_event("agent.credentials", agent))


@transaction.atomic
def agent_peer_trust(
    *, agent: Agent, trusted: bool, actor: User | None = None, actor_label: str = ""
) -> bool:
    """Trust the agent as another hub (or no longer): the delegation chain it sends with its
    calls is then taken as who really asked (`a2a_core.federation`). False if nothing changed."""
    agent = Agent.objects.select_for_update().get(pk=agent.pk)
    if agent.peer_hub == trusted:
        return False
    agent.peer_hub = trusted
    agent.save(update_fields=["peer_hub", "updated_at"])
    audit_record(
        action="agent.peer_trust" if trusted else "agent.peer_untrust",
        summary=(
            f"trusted {agent.slug} as a peer hub: the chain it sends is recorded and judged"
            if trusted
            else f"no longer trusts {agent.slug} as a peer hub"
        ),
        actor=actor,
        actor_label=actor_label,
        agent=agent,
        object_type="agent",
        object_id=agent.slug,
    )
    publish_many_on_commit(_agent_event("agent.credentials", agent))
    return True
