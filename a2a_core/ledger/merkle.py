"""The Merkle tree of RFC 9162 (Certificate Transparency 2.0), section 2.1.

Leaves are hashed as SHA-256(0x00 || entry), interior nodes as SHA-256(0x01 || left ||
right); a tree of n > 1 leaves splits at k, the largest power of two below n. Besides the
tree hash (`root`), the inclusion proof of a leaf (`inclusion_proof`) and its check
(`verify_inclusion`, RFC 9162 2.1.3.2), the log keeps a *frontier*: the roots of the perfect
subtrees its leaves make, largest first (the binary digits of its size), from which the root
of the whole log costs O(log n) and a new leaf is appended in O(log n) (`frontier_append`,
`frontier_root`). Each merge while appending makes the root of a perfect subtree, which the
log keeps (`frontier_append`'s `made`); from them `inclusion_proof_by` makes a leaf's proof
reading O(log n) nodes (`range_root`) instead of every leaf.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

EMPTY_ROOT = hashlib.sha256(b"").digest()


def leaf_hash(entry: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + entry).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two smaller than n (n > 1)."""
    return 1 << ((n - 1).bit_length() - 1)


def root(leaves: Sequence[bytes]) -> bytes:
    """MTH(D[n]) over leaf hashes (already `leaf_hash`ed)."""
    n = len(leaves)
    if n == 0:
        return EMPTY_ROOT
    if n == 1:
        return leaves[0]
    k = _split(n)
    return node_hash(root(leaves[:k]), root(leaves[k:]))


def inclusion_proof(index: int, leaves: Sequence[bytes]) -> list[bytes]:
    """PATH(m, D[n]): the audit path of leaf `index` in the tree of `leaves` (leaf hashes)."""
    n = len(leaves)
    if not 0 <= index < n:
        raise ValueError(f"leaf {index} is not in a tree of {n}")
    if n == 1:
        return []
    k = _split(n)
    if index < k:
        return [*inclusion_proof(index, leaves[:k]), root(leaves[k:])]
    return [*inclusion_proof(index - k, leaves[k:]), root(leaves[:k])]


def verify_inclusion(
    index: int, size: int, leaf: bytes, proof: Sequence[bytes], expected_root: bytes
) -> bool:
    """RFC 9162 2.1.3.2: does `proof` show leaf hash `leaf` at `index` in the tree of `size`
    leaves whose root is `expected_root`?"""
    if not 0 <= index < size:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while fn & 1 == 0 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == expected_root


def frontier_append(
    frontier: list[bytes],
    size: int,
    leaf: bytes,
    made: list[tuple[int, int, bytes]] | None = None,
) -> list[bytes]:
    """The frontier of a log of `size` leaves after appending `leaf` (a leaf hash). `made`
    gets each perfect subtree the append completes, as (level, index, root)."""
    frontier = list(frontier)
    node, n, level = leaf, size, 0
    while n & 1:
        node = node_hash(frontier.pop(), node)
        n >>= 1
        level += 1
        if made is not None:
            made.append((level, n, node))
    frontier.append(node)
    return frontier


Node = Callable[[int, int], bytes]


def range_root(start: int, n: int, node: Node) -> bytes:
    """MTH of the `n` leaves from `start`, from the roots of the perfect subtrees in it:
    `node(level, index)` is the root of the 2**level leaves from index * 2**level (level 0:
    a leaf hash)."""
    if n & (n - 1) == 0 and start % n == 0:
        level = n.bit_length() - 1
        return node(level, start >> level)
    k = _split(n)
    return node_hash(range_root(start, k, node), range_root(start + k, n - k, node))


def inclusion_proof_by(index: int, size: int, node: Node) -> list[bytes]:
    """`inclusion_proof(index, leaves[:size])`, from subtree roots (`range_root`)."""
    if not 0 <= index < size:
        raise ValueError(f"leaf {index} is not in a tree of {size}")
    proof: list[bytes] = []
    start, n, m = 0, size, index
    while n > 1:
        k = _split(n)
        if m < k:
            proof.append(range_root(start + k, n - k, node))
            n = k
        else:
            proof.append(range_root(start, k, node))
            start, n, m = start + k, n - k, m - k
    return proof[::-1]


def frontier_root(frontier: Sequence[bytes]) -> bytes:
    """The tree hash of the log whose frontier this is."""
    if not frontier:
        return EMPTY_ROOT
    acc = frontier[-1]
    for subtree in reversed(frontier[:-1]):
        acc = node_hash(subtree, acc)
    return acc
