"""The Merkle tree of RFC 9162 against the test vectors of Certificate Transparency's
reference implementations (the eight leaves of RFC 6962's test data)."""

from __future__ import annotations

from a2a_core.ledger import merkle

LEAVES = [
    b"",
    b"\x00",
    b"\x10",
    b"\x20\x21",
    b"\x30\x31",
    b"\x40\x41\x42\x43",
    bytes(range(0x50, 0x58)),
    bytes(range(0x60, 0x70)),
]
ROOTS = [
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]
HASHES = [merkle.leaf_hash(leaf) for leaf in LEAVES]


def test_the_tree_hash_of_each_prefix_is_the_reference_root():
    assert [merkle.root(HASHES[: n + 1]).hex() for n in range(8)] == ROOTS
    assert merkle.root([]).hex() == (
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    )


def test_the_frontier_gives_the_same_root_as_the_whole_tree():
    frontier: list[bytes] = []
    roots = []
    for size, leaf in enumerate(HASHES):
        frontier = merkle.frontier_append(frontier, size, leaf)
        roots.append(merkle.frontier_root(frontier).hex())
    assert roots == ROOTS
    assert len(frontier) == 1  # eight leaves: one perfect subtree


def test_the_inclusion_proof_of_leaf_0_in_the_tree_of_8_is_the_reference_path():
    assert [p.hex() for p in merkle.inclusion_proof(0, HASHES)] == [
        "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
    ]


def test_every_leaf_verifies_in_every_tree_and_a_changed_proof_or_place_does_not():
    for size in range(1, 9):
        root = bytes.fromhex(ROOTS[size - 1])
        for index in range(size):
            proof = merkle.inclusion_proof(index, HASHES[:size])
            assert merkle.verify_inclusion(index, size, HASHES[index], proof, root)
            assert not merkle.verify_inclusion(index, size, HASHES[(index + 1) % 8], proof, root)
            if proof:
                flipped = [bytes([proof[0][0] ^ 1]) + proof[0][1:], *proof[1:]]
                assert not merkle.verify_inclusion(index, size, HASHES[index], flipped, root)
                assert not merkle.verify_inclusion(index, size, HASHES[index], proof[:-1], root)
        assert not merkle.verify_inclusion(size, size, HASHES[0], [], root)
        assert not merkle.verify_inclusion(-1, size, HASHES[0], [], root)


def test_proofs_from_the_kept_subtrees_are_the_proofs_from_every_leaf():
    # A log of 37 leaves appended one by one, keeping each perfect subtree it completes;
    # every leaf's proof in every tree size, from those alone, is the proof from the leaves.
    leaves = [merkle.leaf_hash(str(i).encode()) for i in range(37)]
    kept: dict[tuple[int, int], bytes] = {(0, i): h for i, h in enumerate(leaves)}
    frontier: list[bytes] = []
    for size, leaf in enumerate(leaves):
        made: list[tuple[int, int, bytes]] = []
        frontier = merkle.frontier_append(frontier, size, leaf, made)
        kept.update({(level, index): root for level, index, root in made})
    reads: list[tuple[int, int]] = []

    def node(level: int, index: int) -> bytes:
        reads.append((level, index))
        return kept[(level, index)]

    for size in range(1, len(leaves) + 1):
        for index in range(size):
            reads.clear()
            proof = merkle.inclusion_proof_by(index, size, node)
            assert proof == merkle.inclusion_proof(index, leaves[:size])
            assert len(reads) <= 2 * size.bit_length()
    assert merkle.range_root(0, 37, node) == merkle.root(leaves)
