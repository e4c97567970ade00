"""Entries' canonical form and hashes, and the signed statements over them: checkpoints
(signed tree heads) and receipts, compact JWS made with the hub's card-signing key and
checked with its published JWKS alone.

- an entry is the canonical JSON of its body (keys sorted, no whitespace, UTF-8);
- its leaf hash is SHA-256(0x00 || entry) (RFC 9162), its chain hash SHA-256(previous chain
  hash || leaf hash), the first one's previous hash 32 zero bytes;
- a checkpoint's payload is {"hub", "size", "root", "issuedAt"} (hex root);
- a receipt's payload is {"hub", "index", "leafHash", "entry", "checkpoint": {"size", "root",
  "issuedAt", "jws"}, "proof": [hex, ...]}.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import jwt
from jwt.api_jwk import PyJWK

from a2a_core.ledger import merkle

CHECKPOINT_TYP = "a2a-hub-checkpoint+jwt"
RECEIPT_TYP = "a2a-hub-receipt+jwt"
GENESIS = bytes(32)


class ProofError(Exception):
    """A statement that does not hold: the message says which and why."""


def canonical(body: dict[str, Any]) -> str:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def leaf_of(entry: str) -> bytes:
    return merkle.leaf_hash(entry.encode())


def chain_of(previous: bytes, leaf: bytes) -> bytes:
    return hashlib.sha256(previous + leaf).digest()


def sign(payload: dict[str, Any], pem: bytes, algorithm: str, kid: str, typ: str) -> str:
    return jwt.encode(payload, pem, algorithm=algorithm, headers={"kid": kid, "typ": typ})


def _key(jwks: dict[str, Any], kid: str) -> PyJWK:
    for key in jwks.get("keys", []) if isinstance(jwks, dict) else []:
        if isinstance(key, dict) and key.get("kid") == kid:
            return PyJWK(key)
    raise ProofError(f"the JWKS has no key {kid!r}")


def open_signed(token: str, jwks: dict[str, Any], typ: str) -> dict[str, Any]:
    """The payload of a compact JWS signed by a key of `jwks`, of type `typ`."""
    if not isinstance(token, str):
        raise ProofError("not a compact JWS")
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError as exc:
        raise ProofError(f"not a compact JWS: {exc}") from None
    if header.get("typ") != typ:
        raise ProofError(f"a JWS of type {header.get('typ')!r}, not {typ!r}")
    key = _key(jwks, str(header.get("kid", "")))
    try:
        payload: dict[str, Any] = jwt.decode(
            token,
            key.key,
            algorithms=[str(key.algorithm_name)],
            options={"verify_aud": False, "verify_exp": False, "verify_iat": False},
        )
    except jwt.PyJWTError as exc:
        raise ProofError(f"the signature does not verify: {exc}") from None
    return payload


def checkpoint_payload(hub: str, size: int, root: bytes, issued_at: str) -> dict[str, Any]:
    return {"hub": hub, "size": size, "root": root.hex(), "issuedAt": issued_at}


def check_checkpoint(token: str, jwks: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint's payload, once its signature holds."""
    payload = open_signed(token, jwks, CHECKPOINT_TYP)
    if not isinstance(payload.get("size"), int) or not isinstance(payload.get("root"), str):
        raise ProofError("a checkpoint without a size and a root")
    return payload


def check_receipt(token: str, jwks: dict[str, Any]) -> dict[str, Any]:
    """A receipt's payload, once everything in it holds: its signature, its checkpoint's
    signature, the entry's leaf hash and its inclusion in the checkpoint's tree."""
    payload = open_signed(token, jwks, RECEIPT_TYP)
    try:
        index, entry = int(payload["index"]), payload["entry"]
        leaf = bytes.fromhex(payload["leafHash"])
        proof = [bytes.fromhex(p) for p in payload["proof"]]
        checkpoint = payload["checkpoint"]
    except (KeyError, TypeError, ValueError):
        raise ProofError("a receipt without index, entry, leafHash, proof and checkpoint") from None
    if not isinstance(entry, str) or leaf_of(entry) != leaf:
        raise ProofError("the entry does not hash to the receipt's leaf hash")
    head = check_checkpoint(str(checkpoint.get("jws", "")), jwks)
    if head.get("size") != checkpoint.get("size") or head.get("root") != checkpoint.get("root"):
        raise ProofError("the receipt's checkpoint differs from its signed copy")
    try:
        root = bytes.fromhex(head["root"])
    except ValueError:
        raise ProofError("the checkpoint's root is not hex") from None
    if not merkle.verify_inclusion(index, head["size"], leaf, proof, root):
        raise ProofError(f"entry {index} is not included in the tree of {head['size']}")
    return payload
