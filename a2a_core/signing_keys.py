"""The hub's signing key (HUB_CARD_SIGNING_KEY) and its public JWK Set: the one key that signs
the cards the hub serves (`a2a_core.protocol.signing`) and the record's checkpoints and
receipts (`a2a_core.services.ledger`), published at /.well-known/jwks.json."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from django.conf import settings
from jwt.algorithms import ECAlgorithm, RSAAlgorithm
from jwt.utils import base64url_encode


@dataclass(frozen=True)
class SigningKey:
    pem: bytes
    algorithm: str
    public_jwk: dict[str, Any]

    @property
    def kid(self) -> str:
        return str(self.public_jwk["kid"])


def _thumbprint(jwk: dict[str, Any]) -> str:
    """The RFC 7638 thumbprint: SHA-256 of the required members, sorted, no whitespace."""
    required = ("crv", "kty", "x", "y") if jwk["kty"] == "EC" else ("e", "kty", "n")
    canonical = json.dumps({k: jwk[k] for k in required}, separators=(",", ":"), sort_keys=True)
    return base64url_encode(hashlib.sha256(canonical.encode()).digest()).decode()


@lru_cache(maxsize=4)
def _load(pem: str) -> SigningKey:
    private = load_pem_private_key(pem.encode(), password=None)
    if isinstance(private, ec.EllipticCurvePrivateKey) and isinstance(private.curve, ec.SECP256R1):
        algorithm, jwk = "ES256", ECAlgorithm.to_jwk(private.public_key(), as_dict=True)
    elif isinstance(private, rsa.RSAPrivateKey):
        algorithm, jwk = "RS256", RSAAlgorithm.to_jwk(private.public_key(), as_dict=True)
    else:
        raise ValueError("HUB_CARD_SIGNING_KEY must be an EC P-256 or an RSA private key")
    public = {**jwk, "use": "sig", "alg": algorithm}
    public["kid"] = _thumbprint(public)
    return SigningKey(pem=pem.encode(), algorithm=algorithm, public_jwk=public)


def signing_key() -> SigningKey:
    return _load(settings.HUB_CARD_SIGNING_KEY)


def jwks() -> dict[str, Any]:
    """The hub's public keys as a JWK Set."""
    return {"keys": [signing_key().public_jwk]}
