"""Recomputing a log: every entry's leaf hash, the chain, and the Merkle root at every
checkpoint, whose signatures are checked with the JWKS. One pass, O(log n) memory: the
entries are fed in order (from the database or an export) and the first problem is kept.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from a2a_core.ledger import merkle
from a2a_core.ledger.proofs import GENESIS, ProofError, chain_of, check_checkpoint, leaf_of


@dataclass(frozen=True)
class Problem:
    """What is wrong, and where: an entry's index, kind and object when one is named."""

    what: str
    index: int | None = None
    kind: str = ""
    object: str = ""

    def __str__(self) -> str:
        where = f"entry {self.index}" if self.index is not None else "the log"
        if self.kind or self.object:
            where += f" ({self.kind} {self.object})"
        return f"{where}: {self.what}"


@dataclass(frozen=True)
class Checkpoint:
    size: int
    root: str
    jws: str


class LogCheck:
    """Feed `entry()` the log's entries in index order, then call `finish()`."""

    def __init__(self, checkpoints: Sequence[Checkpoint], jwks: dict[str, Any]) -> None:
        self.problem: Problem | None = None
        self.size = 0
        self.chain = GENESIS
        self.frontier: list[bytes] = []
        self.checked = 0
        self._due: list[Checkpoint] = []
        for cp in sorted(checkpoints, key=lambda c: c.size):
            try:
                payload = check_checkpoint(cp.jws, jwks)
            except ProofError as exc:
                self._fail(Problem(f"checkpoint of size {cp.size}: {exc}"))
                continue
            if payload["size"] != cp.size or payload["root"] != cp.root:
                self._fail(
                    Problem(f"checkpoint of size {cp.size} differs from what its signature covers")
                )
                continue
            self._due.append(cp)

    def _fail(self, problem: Problem) -> None:
        if self.problem is None:
            self.problem = problem

    def entry(
        self, index: int | None, body: str, leaf_hex: str, chain_hex: str, kind: str, obj: str
    ) -> None:
        if self.problem is not None:
            return
        named = {"kind": kind, "object": obj}
        if index != self.size:
            what = (
                f"the log jumps from {self.size - 1} to {index}: entries were deleted"
                if isinstance(index, int) and index > self.size
                else f"found at position {self.size}: an entry was inserted or reordered"
            )
            self._fail(Problem(what, index=self.size, **named))
            return
        leaf = leaf_of(body)
        if leaf.hex() != leaf_hex:
            self._fail(Problem("its body does not hash to its leaf hash (changed)", index, **named))
            return
        try:
            parsed = json.loads(body)
            said = f"{parsed['type']}:{parsed['id']}"
        except (ValueError, KeyError, TypeError):
            parsed, said = {}, ""
        if parsed.get("kind") != kind or said != obj:
            self._fail(
                Problem("its kind or object differ from its body's (changed)", index, **named)
            )
            return
        self.chain = chain_of(self.chain, leaf)
        if self.chain.hex() != chain_hex:
            self._fail(
                Problem("its chain hash does not follow from the previous entry", index, **named)
            )
            return
        self.frontier = merkle.frontier_append(self.frontier, self.size, leaf)
        self.size += 1
        while self._due and self._due[0].size == self.size:
            cp = self._due.pop(0)
            if merkle.frontier_root(self.frontier).hex() != cp.root:
                self._fail(
                    Problem(
                        f"the first {cp.size} entries do not make the root the checkpoint of "
                        f"size {cp.size} signed: an entry up to {cp.size - 1} was changed, "
                        "removed or inserted and the hashes rewritten",
                        index=cp.size - 1,
                    )
                )
                return
            self.checked += 1

    def finish(self) -> Problem | None:
        if self.problem is None and self._due:
            cp = self._due[0]
            self._fail(
                Problem(
                    f"a checkpoint signed {cp.size} entries; the log has {self.size}: "
                    "entries were deleted",
                    index=self.size,
                )
            )
        return self.problem
