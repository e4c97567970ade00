"""Writing and sealing the tamper-evident record (the pure parts: `a2a_core.ledger`).

Writes: each governed change appends an entry, unsealed, in the transaction of the change,
so nothing governed commits without its entry: the policy's decisions (one insert per group
commit, `ledger_decisions`), humans' decisions on held messages, audit events, policy
versions, agents' governed fields and identity rows (`ledger_append`, and the model signals
of `a2a_core.services.ledger_hooks`). An entry's body is the canonical JSON of {"kind",
"type", "id", "at", "state"}: `state` is the object's governed fields (`governed_state`) as
they are after the change, null when the change removed the object.

Sealing, off the callers' wait: every HUB_LEDGER_SEAL_SECONDS each hub process (and, on
demand, a caller asking for a receipt) takes the head row's lock (`select_for_update`;
SQLite serialises writers anyway), gives the unsealed entries their leaf indexes in id order,
their leaf and chain hashes, and moves the head on (size, chain hash, Merkle frontier). Every
HUB_LEDGER_CHECKPOINT_SECONDS, when the log grew, it signs a checkpoint. Processes share the
head, so any number of them make one log. Between a write and its seal (the log's *merge
delay*, as Certificate Transparency calls it: about HUB_LEDGER_SEAL_SECONDS) an entry is
recorded but not yet hashed into the log.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Model
from django.utils import timezone

from a2a_core.ledger import merkle
from a2a_core.ledger.proofs import (
    CHECKPOINT_TYP,
    GENESIS,
    canonical,
    chain_of,
    checkpoint_payload,
    leaf_of,
    sign,
)
from a2a_core.models import (
    Agent,
    AgentStatus,
    AuditEvent,
    IssuerMapping,
    LedgerCheckpoint,
    LedgerEntry,
    LedgerHead,
    LedgerKind,
    LedgerNode,
    Message,
    PolicyVersion,
    TrustedIssuer,
)
from a2a_core.signing_keys import signing_key
from a2a_core.storage.rows import insert_values, update_values

# Entries sealed per transaction: a backlog is sealed in several, the head lock held briefly.
SEAL_CHUNK = 5000
_COLUMNS = ["kind", "object_type", "object_id", "body", "leaf_hash", "chain_hash"]

# object_type -> (kind, model)
GOVERNED: dict[str, tuple[str, type[Model]]] = {
    "message": (LedgerKind.DECISION, Message),
    "audit": (LedgerKind.HUMAN, AuditEvent),
    "policy": (LedgerKind.POLICY, PolicyVersion),
    "agent": (LedgerKind.AGENT, Agent),
    "issuer": (LedgerKind.IDENTITY, TrustedIssuer),
    "issuer_mapping": (LedgerKind.IDENTITY, IssuerMapping),
}
TYPE_OF: dict[type[Model], str] = {model: name for name, (_, model) in GOVERNED.items()}


def ledger_on() -> bool:
    return bool(settings.HUB_LEDGER)


def _at(value: datetime | None) -> str | None:
    return None if value is None else value.astimezone(UTC).isoformat()


def _json(value: Any) -> Any:
    # What a JSONField reads back: a copy through JSON (tuples as lists, and the like).
    return json.loads(json.dumps(value))


def governed_state(obj: Model) -> dict[str, Any]:
    """The fields of a governed row the record covers: what decides, who acted, what they
    did. Not churn (an agent's status, its last heartbeat) and never a secret (tokens and
    credentials are covered by their prefix, scheme and when they were set). Foreign keys the
    database may set to NULL on its own (ON DELETE SET NULL: a message's human author, an
    audit event's user and agent) are left out; the names in words stay."""
    if isinstance(obj, Message):
        return {
            "messageId": obj.message_id,
            "sender": obj.sender_id,
            "target": obj.target_id,
            "kind": obj.kind,
            "decision": obj.decision,
            "reason": obj.decision_reason,
            "detail": obj.decision_detail,
            "redirectedTo": obj.redirected_to_id,
            "digest": obj.digest,
            "createdAt": _at(obj.created_at),
        }
    if isinstance(obj, AuditEvent):
        return {
            "action": obj.action,
            "actor": obj.actor_label,
            "objectType": obj.object_type,
            "objectId": obj.object_id,
            "summary": obj.summary,
            "data": _json(obj.data),
            "createdAt": _at(obj.created_at),
        }
    if isinstance(obj, PolicyVersion):
        return {
            "number": obj.number,
            "document": _json(obj.document),
            "author": obj.author_label,
            "reason": obj.reason,
            "diff": _json(obj.diff),
            "createdAt": _at(obj.created_at),
        }
    if isinstance(obj, Agent):
        return {
            "slug": obj.slug,
            "name": obj.name,
            "deliveryMode": obj.delivery_mode,
            "url": obj.endpoint_url,
            "binding": obj.endpoint_binding,
            "cardDigest": obj.card_digest,
            "scopes": _json(obj.scopes),
            "suspended": obj.status == AgentStatus.SUSPENDED,
            "tokenPrefix": obj.token_prefix,
            "tokenIssuedAt": _at(obj.token_issued_at),
            "credentialScheme": obj.credential_scheme,
            "credentialKind": obj.credential_kind,
            "credentialSetAt": _at(obj.credential_set_at),
            "peerHub": obj.peer_hub,
        }
    if isinstance(obj, TrustedIssuer):
        return {"issuer": obj.issuer, "jwksUrl": obj.jwks_url, "audience": obj.audience}
    if isinstance(obj, IssuerMapping):
        return {
            "issuer": obj.issuer_id,
            "claim": obj.claim,
            "value": obj.value,
            "agent": obj.agent_id,
        }
    raise TypeError(f"{type(obj).__name__} is not governed by the record")


def _body(
    kind: str,
    object_type: str,
    object_id: str,
    state: dict[str, Any] | None,
    at: str,
    baseline: bool = False,
) -> str:
    body: dict[str, Any] = {
        "kind": kind,
        "type": object_type,
        "id": object_id,
        "at": at,
        "state": state,
    }
    if baseline:
        # Taken in as it was found: the record says nothing of this row before `at`.
        body["baseline"] = True
    return canonical(body)


def _append(
    rows: Iterable[tuple[str, str, str, dict[str, Any] | None]], *, baseline: bool = False
) -> None:
    """One INSERT for the entries (`insert_values`: no model instances, one statement)."""
    at = timezone.now().isoformat()
    values = [[k, t, i, _body(k, t, i, s, at, baseline), "", ""] for k, t, i, s in rows]
    insert_values(LedgerEntry, _COLUMNS, values)


def ledger_decisions(rows: Sequence[Message]) -> None:
    """The policy's decisions on just-inserted messages: one entry each, one statement."""
    if ledger_on() and rows:
        _append((LedgerKind.DECISION, "message", str(row.pk), governed_state(row)) for row in rows)


def ledger_append(objs: Sequence[Model], *, removed: bool = False, baseline: bool = False) -> None:
    """Entries for governed rows as they are now (or removed); in the change's transaction.
    `baseline`: rows taken in as found (`ledger_baseline`)."""
    if (ledger_on() or baseline) and objs:
        _append(
            (
                (
                    GOVERNED[TYPE_OF[type(obj)]][0],
                    TYPE_OF[type(obj)],
                    str(obj.pk),
                    None if removed else governed_state(obj),
                )
                for obj in objs
            ),
            baseline=baseline,
        )


# --- sealing and checkpoints ----------------------------------------------------------------


def _head() -> LedgerHead:
    head = LedgerHead.objects.select_for_update().filter(pk=1).first()
    if head is None:
        LedgerHead.objects.get_or_create(pk=1)
        head = LedgerHead.objects.select_for_update().get(pk=1)
    return head


def _sign(size: int, root: bytes) -> LedgerCheckpoint:
    key = signing_key()
    issued = timezone.now()
    payload = checkpoint_payload(hub_name(), size, root, issued.isoformat())
    jws = sign(payload, key.pem, key.algorithm, key.kid, CHECKPOINT_TYP)
    return LedgerCheckpoint.objects.create(size=size, root=root.hex(), issued_at=issued, jws=jws)


def hub_name() -> str:
    return str(settings.HUB_PUBLIC_URL or settings.HUB_NAME)


def ledger_seal(*, checkpoint: bool = False) -> int:
    """Seal what is unsealed (all of it, in chunks); with `checkpoint`, then sign a checkpoint
    if the log grew since the last. The log's size after."""
    if not checkpoint and not LedgerEntry.objects.filter(leaf_index__isnull=True).exists():
        # Nothing to seal: no write lock taken (on SQLite, the whole database's).
        return int(LedgerHead.objects.values_list("size", flat=True).first() or 0)
    while True:
        with transaction.atomic():
            head = _head()
            pending = list(
                LedgerEntry.objects.filter(leaf_index__isnull=True)
                .order_by("id")
                .values_list("id", "body")[:SEAL_CHUNK]
            )
            if not pending:
                if checkpoint:
                    last = LedgerCheckpoint.objects.order_by("-size").first()
                    if head.size and (last is None or last.size < head.size):
                        frontier = [bytes.fromhex(h) for h in head.frontier]
                        _sign(head.size, merkle.frontier_root(frontier))
                return head.size
            chain = bytes.fromhex(head.chain_hash) if head.chain_hash else GENESIS
            frontier = [bytes.fromhex(h) for h in head.frontier]
            size = head.size
            updates = []
            made: list[tuple[int, int, bytes]] = []
            for pk, body in pending:
                leaf = leaf_of(body)
                chain = chain_of(chain, leaf)
                frontier = merkle.frontier_append(frontier, size, leaf, made)
                updates.append((pk, [size, leaf.hex(), chain.hex()]))
                size += 1
            update_values(LedgerEntry, ["leaf_index", "leaf_hash", "chain_hash"], updates)
            insert_values(
                LedgerNode, ["level", "index", "hash"], [[lv, i, h.hex()] for lv, i, h in made]
            )
            head.size, head.chain_hash = size, chain.hex()
            head.frontier = [h.hex() for h in frontier]
            head.save(update_fields=["size", "chain_hash", "frontier"])


def ledger_checkpoint() -> LedgerCheckpoint | None:
    """Seal, and sign a checkpoint of the whole log now (None when the log is empty)."""
    size = ledger_seal(checkpoint=True)
    return LedgerCheckpoint.objects.filter(size=size).order_by("-id").first() if size else None
