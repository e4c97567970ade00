"""The hub's card signatures: every card it serves to A2A 1.x clients carries a detached JWS
(`AgentCardSignature`) over the card's RFC 8785 canonical form, made with
HUB_CARD_SIGNING_KEY; GET /.well-known/jwks.json publishes the public key, and each
signature's protected header names it (`kid`) and where to fetch it (`jku`)."""

from __future__ import annotations

from a2a.types.a2a_pb2 import AgentCard
from a2a.utils.signing import ProtectedHeader, create_agent_card_signer
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from a2a_core.signing_keys import SigningKey, jwks, signing_key

__all__ = ["JWKS_PATH", "SigningKey", "jwks", "jwks_endpoint", "sign", "signing_key"]

JWKS_PATH = "/.well-known/jwks.json"


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
