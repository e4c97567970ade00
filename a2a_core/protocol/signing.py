"""The hub's card signatures: every card it serves to A2A 1.x clients carries a detached JWS
(`AgentCardSignature`) over the card's RFC 8785 canonical form, made with
HUB_CARD_SIGNING_KEY; GET /.well-known/jwks.json publishes the public key, and each
signature's protected header names it (`kid`) and where to fetch it (`jku`)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from a2a.types.a2a_pb2 import AgentCard
from a2a.utils.signing import ProtectedHeader, create_agent_card_signer
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from django.conf import settings
from jwt.algorithms import ECAlgorithm, RSAAlgorithm
from jwt.utils import base64url_encode
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

JWKS_PATH = "/.well-known/jwks.json"


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


def sign(card: AgentCard, base: str) -> None:
    """Replace the card's signatures with the hub's own (the agent's, if it signed the card it
    registered, covered a card the hub has since rewritten)."""
    key = signing_key()
    header: ProtectedHeader = {
        "kid": key.kid,
        "alg": key.algorithm,
        "jku": f"{base}{JWKS_PATH}",
        "typ": "JOSE",
    }
    del card.signatures[:]
    create_agent_card_signer(key.pem, header)(card)


async def jwks_endpoint(request: Request) -> Response:
    return JSONResponse(jwks(), headers={"Cache-Control": "public, max-age=300"})
