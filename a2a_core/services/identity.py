"""Trusted identity providers: which issuers' JWTs the hub accepts, and which agent each
token is (a claim, `sub` by default, equal to a value). Read per call by
`a2a_core.protocol.identity`, so a change applies to the next call."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import transaction

from a2a_core import jwks
from a2a_core.errors import Conflict, FieldProblem, NotFound, ValidationFailed
from a2a_core.models import Agent, IssuerMapping, TrustedIssuer
from a2a_core.services.audit import audit_record


def _check(*, issuer: str, jwks_url: str, audience: str, claim: str, value: str) -> None:
    problems = [
        FieldProblem(name, "must not be empty")
        for name, given in (
            ("issuer", issuer),
            ("jwksUrl", jwks_url),
            ("audience", audience),
            ("claim", claim),
            ("value", value),
        )
        if not given.strip()
    ]
    if jwks_url.strip():
        try:
            jwks.check_url(jwks_url)
        except jwks.JwksUnavailable as exc:
            problems.append(FieldProblem("jwksUrl", str(exc)))
    if problems:
        raise ValidationFailed("invalid trusted issuer", problems)


@transaction.atomic
def issuer_trust(
    *,
    issuer: str,
    jwks_url: str,
    audience: str,
    agent: Agent,
    value: str,
    claim: str = "sub",
    actor: User | None = None,
    actor_label: str = "",
) -> IssuerMapping:
    """Trust `issuer` (its JWKS and the audience its tokens must carry; an issuer already
    trusted takes the new ones) and map its tokens whose `claim` equals `value` to `agent`.
    Raises `ValidationFailed` for an empty field or a JWKS URL that is not http(s), and
    `Conflict` when that claim value already maps to another agent."""
    _check(issuer=issuer, jwks_url=jwks_url, audience=audience, claim=claim, value=value)
    row, _ = TrustedIssuer.objects.select_for_update().get_or_create(
        issuer=issuer, defaults={"jwks_url": jwks_url, "audience": audience}
    )
    if (row.jwks_url, row.audience) != (jwks_url, audience):
        row.jwks_url, row.audience = jwks_url, audience
        row.save(update_fields=["jwks_url", "audience"])
    mapping = IssuerMapping.objects.filter(issuer=row, claim=claim, value=value).first()
    if mapping is not None and mapping.agent_id != agent.pk:
        raise Conflict(
            f"{claim}={value!r} of {issuer} already signs in as {mapping.agent.slug}; "
            f"remove it first (a2a issuer remove {issuer} --agent {mapping.agent.slug})"
        )
    if mapping is None:
        mapping = IssuerMapping.objects.create(issuer=row, claim=claim, value=value, agent=agent)
    audit_record(
        action="issuer.trust",
        summary=f"{agent.slug} signs in with {issuer} tokens whose {claim} is {value!r}",
        actor=actor,
        actor_label=actor_label,
        agent=agent,
        object_type="issuer",
        object_id=issuer,
        data={"jwksUrl": jwks_url, "audience": audience, "claim": claim, "value": value},
    )
    return mapping


@transaction.atomic
def issuer_remove(
    *,
    issuer: str,
    agent: Agent | None = None,
    actor: User | None = None,
    actor_label: str = "",
) -> int:
    """Stop trusting `issuer` (with `agent`: only stop mapping its tokens to that agent).
    Returns how many mappings were removed; raises `NotFound` for an issuer not trusted."""
    row = TrustedIssuer.objects.select_for_update().filter(issuer=issuer).first()
    if row is None:
        raise NotFound(f"{issuer} is not a trusted issuer")
    mappings = IssuerMapping.objects.filter(issuer=row)
    if agent is not None:
        mappings = mappings.filter(agent=agent)
    removed = mappings.count()
    if agent is None:
        row.delete()
        summary = f"no longer trusts {issuer}"
    else:
        mappings.delete()
        summary = f"{agent.slug} no longer signs in with {issuer} tokens"
    audit_record(
        action="issuer.remove",
        summary=summary,
        actor=actor,
        actor_label=actor_label,
        agent=agent,
        object_type="issuer",
        object_id=issuer,
    )
    return removed


def issuer_list() -> list[TrustedIssuer]:
    """Every trusted issuer with its mappings (`mappings`, each with its agent) loaded."""
    return list(TrustedIssuer.objects.prefetch_related("mappings__agent"))
