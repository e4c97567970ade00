"""The tamper-evident record: an append-only log of every governed change, hash-chained and
a Merkle tree (RFC 9162), with signed checkpoints (`a2a_core.services.ledger`)."""

from __future__ import annotations

from django.db import models


class LedgerKind(models.TextChoices):
    DECISION = "decision", "A decision on a message"
    HUMAN = "human", "A human's (or the system's) action"
    POLICY = "policy", "A policy version"
    AGENT = "agent", "An agent's governed fields"
    IDENTITY = "identity", "A trusted issuer or an identity mapping"


class LedgerEntry(models.Model):
    """One governed change. Written unsealed (`leaf_index` NULL) in the transaction of the
    change; the sealer gives it its place in the log and its hashes."""

    kind = models.CharField(max_length=16, choices=LedgerKind)
    object_type = models.CharField(max_length=32)
    object_id = models.CharField(max_length=128)
    # The canonical JSON of the change (`a2a_core.ledger.canonical`): what the hashes cover.
    body = models.TextField()
    leaf_index = models.BigIntegerField(null=True, blank=True, unique=True)
    leaf_hash = models.CharField(max_length=64, blank=True)
    chain_hash = models.CharField(max_length=64, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["object_type", "object_id", "id"], name="ledger_object"),
            # What the sealer reads every second: the few entries not sealed yet.
            models.Index(
                fields=["id"], condition=models.Q(leaf_index__isnull=True), name="ledger_unsealed"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.object_type}:{self.object_id} #{self.leaf_index}"


class LedgerHead(models.Model):
    """The single row (pk 1) the sealer locks: the log's size, the chain's last hash and the
    Merkle frontier (the roots of the perfect subtrees, largest first, hex)."""

    size = models.BigIntegerField(default=0)
    chain_hash = models.CharField(max_length=64, blank=True)
    frontier = models.JSONField(default=list)

    def __str__(self) -> str:
        return f"ledger head {self.size}"


class LedgerNode(models.Model):
    """The root of a perfect subtree of the log (2**level leaves from index * 2**level), kept
    as the sealer makes it, so that an inclusion proof reads O(log n) of them instead of every
    leaf. A cache: a proof made from a wrong one does not verify."""

    level = models.PositiveSmallIntegerField()
    index = models.BigIntegerField()
    hash = models.CharField(max_length=64)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["level", "index"], name="ledger_node_place"),
        ]

    def __str__(self) -> str:
        return f"ledger node {self.level}/{self.index}"


class LedgerCheckpoint(models.Model):
    """A signed tree head: the log's size and Merkle root, signed by the hub's card key."""

    size = models.BigIntegerField()
    root = models.CharField(max_length=64)
    issued_at = models.DateTimeField()
    jws = models.TextField()

    class Meta:
        ordering = ["-size", "-id"]

    def __str__(self) -> str:
        return f"checkpoint {self.size} {self.root[:12]}"
