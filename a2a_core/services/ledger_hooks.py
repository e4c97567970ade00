"""The record's entries for governed rows saved through the ORM: audit events (every human
action: approve, reject, edit with its diff, redirect, claim, logins), policy versions,
agents and identity rows. A save appends an entry in the save's transaction, unless it
updated none of the governed fields (an agent's heartbeat); a delete appends an entry saying
the row was removed, so that `a2a audit verify` tells a purge from a tamper. Messages are
written by the group commit without signals and append their own entries
(`a2a_core.services.ledger.ledger_decisions`)."""

from __future__ import annotations

from typing import Any

from django.db.models import Model
from django.db.models.signals import post_delete, post_save

from a2a_core.models import Agent, AuditEvent, IssuerMapping, PolicyVersion, TrustedIssuer
from a2a_core.services.ledger import ledger_append

# The model fields behind each governed state (`ledger.governed_state`): a save whose
# update_fields name none of them changes nothing the record covers.
_FIELDS: dict[type[Model], frozenset[str]] = {
    Agent: frozenset(
        {
            "slug",
            "name",
            "delivery_mode",
            "endpoint_url",
            "endpoint_binding",
            "card_digest",
            "scopes",
            "status",
            "token_prefix",
            "token_issued_at",
            "credential_scheme",
            "credential_kind",
            "credential_set_at",
            "peer_hub",
        }
    ),
}


def _saved(sender: type[Model], instance: Model, created: bool, **kwargs: Any) -> None:
    fields = kwargs.get("update_fields")
    governed = _FIELDS.get(sender)
    if fields is not None and governed is not None and not governed & set(fields):
        return
    ledger_append([instance])


def _deleted(sender: type[Model], instance: Model, **kwargs: Any) -> None:
    ledger_append([instance], removed=True)


def connect() -> None:
    for model in (AuditEvent, PolicyVersion, Agent, TrustedIssuer, IssuerMapping):
        post_save.connect(_saved, sender=model, dispatch_uid=f"ledger-save-{model.__name__}")
        post_delete.connect(_deleted, sender=model, dispatch_uid=f"ledger-del-{model.__name__}")
