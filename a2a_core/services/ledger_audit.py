"""Checking the database against its tamper-evident record, exporting the record, and
receipts for decisions.

`ledger_verify` recomputes the log (`a2a_core.ledger.check`: every leaf hash, the chain, the
Merkle root at every checkpoint and the checkpoints' signatures, with the hub's own JWKS),
then compares each governed row with the latest entry of its object: a row whose governed
fields differ (an UPDATE), a row without an entry (an INSERT) and an entry whose row is gone
without an entry saying it was removed (a DELETE) are named. Unsealed entries are sealed
first, as the hub would within HUB_LEDGER_SEAL_SECONDS.

`ledger_baseline` takes in, as they are, the governed rows that have no entry at all: rows
from before the record existed (an upgraded database) or written while HUB_LEDGER was off.
Each gets an entry marked `baseline`, and the baseline itself is an audit event, so the
record shows when it was taken and by whom; the record proves nothing of those rows before.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from typing import Any

from django.db import transaction

from a2a_core.ledger import merkle
from a2a_core.ledger.check import Checkpoint, LogCheck, Problem
from a2a_core.ledger.proofs import RECEIPT_TYP, canonical, sign
from a2a_core.models import Direction, LedgerCheckpoint, LedgerEntry, LedgerNode, Message
from a2a_core.services.audit import audit_record
from a2a_core.services.ledger import (
    GOVERNED,
    governed_state,
    hub_name,
    ledger_append,
    ledger_checkpoint,
    ledger_seal,
)
from a2a_core.signing_keys import jwks, signing_key

CHUNK = 2000
Progress = Callable[[str], None]


def _entries() -> Iterator[tuple[int | None, str, str, str, str, str, str]]:
    """The sealed entries in leaf order, read a chunk at a time."""
    after = -1
    while True:
        chunk = list(
            LedgerEntry.objects.filter(leaf_index__gt=after)
            .order_by("leaf_index")
            .values_list(
                "leaf_index", "body", "leaf_hash", "chain_hash", "kind", "object_type", "object_id"
            )[:CHUNK]
        )
        if not chunk:
            return
        yield from chunk
        after = chunk[-1][0] or 0


def checkpoints() -> list[Checkpoint]:
    return [
        Checkpoint(size, root, token)
        for size, root, token in LedgerCheckpoint.objects.values_list("size", "root", "jws")
    ]


def _rows(object_type: str) -> Iterator[Any]:
    model = GOVERNED[object_type][1]
    query = model._default_manager.order_by("pk")
    if model is Message:
        query = query.filter(direction=Direction.REQUEST)
    return query.iterator(chunk_size=CHUNK)


def _digest(state: dict[str, Any] | None) -> bytes | None:
    return None if state is None else hashlib.sha256(canonical(state).encode()).digest()


def _state_at(index: int | None) -> dict[str, Any]:
    body = LedgerEntry.objects.filter(leaf_index=index).values_list("body", flat=True).first()
    state = json.loads(body).get("state") if body else None
    return state if isinstance(state, dict) else {}


def ledger_verify(progress: Progress | None = None) -> tuple[Problem | None, str]:
    """The first problem found (None: intact), and a one-line summary."""
    ledger_seal()
    check = LogCheck(checkpoints(), jwks())
    # Per object, its latest entry's index, kind and a digest of its state: 32 bytes an
    # object, however large its state.
    latest: dict[tuple[str, str], tuple[int | None, str, bytes | None]] = {}
    for n, (index, body, leaf, chain, kind, otype, oid) in enumerate(_entries(), start=1):
        check.entry(index, body, leaf, chain, kind, f"{otype}:{oid}")
        if check.problem is not None:
            return check.problem, ""
        latest[(otype, oid)] = (index, kind, _digest(json.loads(body).get("state")))
        if progress and n % 50000 == 0:
            progress(f"{n} entries checked")
    problem = check.finish()
    if problem is not None:
        return problem, ""
    seen: set[tuple[str, str]] = set()
    rows = 0
    for otype in GOVERNED:
        for row in _rows(otype):
            key = (otype, str(row.pk))
            seen.add(key)
            rows += 1
            found = latest.get(key)
            if found is None or found[2] is None:
                what = (
                    "has no entry (inserted outside the hub; rows from before the record, or "
                    "written while HUB_LEDGER was off, are taken in by `a2a audit baseline`)"
                    if found is None
                    else "is there, but its entry removed it (inserted outside the hub)"
                )
                return Problem(f"this row {what}", None, "", f"{otype}:{row.pk}"), ""
            index, kind, digest = found
            now = governed_state(row)
            if digest != _digest(now):
                state = _state_at(index)
                changed = sorted(k for k, v in now.items() if state.get(k) != v)
                return Problem(
                    f"the row differs from its entry ({', '.join(changed)}): updated outside the hub",
                    index,
                    kind,
                    f"{otype}:{row.pk}",
                ), ""
            if progress and rows % 50000 == 0:
                progress(f"{rows} rows compared")
    for (otype, oid), (index, kind, digest) in latest.items():
        if digest is not None and (otype, oid) not in seen:
            return Problem(
                "its row is gone, and no entry says it was removed: deleted outside the hub",
                index,
                kind,
                f"{otype}:{oid}",
            ), ""
    return None, (
        f"intact: {check.size} entries, {check.checked} checkpoints, {rows} rows match the record"
    )


def ledger_baseline(actor_label: str = "cli") -> int:
    """Take in the governed rows that have no entry, as they are now (see the module's
    docstring); sealed and signed at once. The number taken in."""
    taken = 0
    with transaction.atomic():
        known = set(LedgerEntry.objects.values_list("object_type", "object_id").distinct())
        for otype in GOVERNED:
            batch: list[Any] = []
            for row in _rows(otype):
                if (otype, str(row.pk)) not in known:
                    batch.append(row)
                if len(batch) >= CHUNK:
                    ledger_append(batch, baseline=True)
                    taken, batch = taken + len(batch), []
            ledger_append(batch, baseline=True)
            taken += len(batch)
        if taken:
            audit_record(
                action="ledger.baseline",
                summary=f"{taken} rows without an entry taken into the tamper-evident record",
                actor_label=actor_label,
                data={"rows": taken},
            )
    ledger_seal(checkpoint=True)
    return taken


def ledger_export_lines() -> Iterator[str]:
    """The record as JSONL: its checkpoints, then its entries in order."""
    ledger_seal()
    for cp in LedgerCheckpoint.objects.order_by("size", "id"):
        yield json.dumps(
            {
                "type": "checkpoint",
                "size": cp.size,
                "root": cp.root,
                "issuedAt": cp.issued_at.isoformat(),
                "jws": cp.jws,
            }
        )
    for index, body, leaf, chain, kind, otype, oid in _entries():
        yield json.dumps(
            {
                "type": "entry",
                "index": index,
                "kind": kind,
                "object": f"{otype}:{oid}",
                "body": body,
                "leafHash": leaf,
                "chainHash": chain,
            },
            ensure_ascii=False,
        )


def _subtrees() -> merkle.Node:
    """The log's subtree roots as `merkle.range_root` asks for them: a leaf's hash (level 0)
    from its entry, a kept one from LedgerNode, else made from its two halves (a log sealed
    before the nodes were kept); each read once."""
    known: dict[tuple[int, int], bytes] = {}

    def node(level: int, index: int) -> bytes:
        found = known.get((level, index))
        if found is not None:
            return found
        if level == 0:
            hex_hash = (
                LedgerEntry.objects.filter(leaf_index=index)
                .values_list("leaf_hash", flat=True)
                .first()
            )
        else:
            hex_hash = (
                LedgerNode.objects.filter(level=level, index=index)
                .values_list("hash", flat=True)
                .first()
            )
        if hex_hash:
            found = bytes.fromhex(hex_hash)
        else:
            if level == 0:
                raise ValueError(f"the log has no leaf {index}")
            found = merkle.node_hash(node(level - 1, 2 * index), node(level - 1, 2 * index + 1))
        known[(level, index)] = found
        return found

    return node


def ledger_receipt(message_pk: int) -> str | None:
    """A signed receipt of the latest decision entry of message `message_pk` (None when it
    has none): sealed and checkpointed now if need be."""
    entry = (
        LedgerEntry.objects.filter(object_type="message", object_id=str(message_pk))
        .order_by("-id")
        .first()
    )
    if entry is None:
        return None
    if entry.leaf_index is None:
        ledger_seal()
        entry.refresh_from_db()
    assert entry.leaf_index is not None
    cp = LedgerCheckpoint.objects.filter(size__gt=entry.leaf_index).order_by("-size").first()
    if cp is None:
        cp = ledger_checkpoint()
    assert cp is not None
    proof = merkle.inclusion_proof_by(entry.leaf_index, cp.size, _subtrees())
    key = signing_key()
    payload = {
        "hub": hub_name(),
        "index": entry.leaf_index,
        "leafHash": entry.leaf_hash,
        "entry": entry.body,
        "checkpoint": {
            "size": cp.size,
            "root": cp.root,
            "issuedAt": cp.issued_at.isoformat(),
            "jws": cp.jws,
        },
        "proof": [p.hex() for p in proof],
    }
    return sign(payload, key.pem, key.algorithm, key.kid, RECEIPT_TYP)
