"""A real identity provider for tests: signing keys made in the test, their JWKS served over
HTTP on 127.0.0.1 (rotatable), and JWTs signed with them."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec
from jwt.algorithms import ECAlgorithm
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.servers import ServerThread


@dataclass
class Key:
    kid: str
    private: ec.EllipticCurvePrivateKey

    @classmethod
    def new(cls) -> Key:
        return cls(kid=secrets.token_hex(8), private=ec.generate_private_key(ec.SECP256R1()))

    def public_jwk(self) -> dict[str, Any]:
        jwk = ECAlgorithm.to_jwk(self.private.public_key(), as_dict=True)
        return {**jwk, "kid": self.kid, "use": "sig", "alg": "ES256"}


class IdentityProvider:
    """Serves GET /jwks.json with its current keys; `issuer` is its base URL."""

    def __init__(self) -> None:
        self.keys = [Key.new()]
        self.fetches = 0
        self.server = ServerThread(
            Starlette(routes=[Route("/jwks.json", self._jwks)]), lifespan="off"
        ).start()
        self.issuer = self.server.url
        self.jwks_url = f"{self.server.url}/jwks.json"

    async def _jwks(self, request: Request) -> JSONResponse:
        self.fetches += 1
        return JSONResponse({"keys": [key.public_jwk() for key in self.keys]})

    def rotate(self) -> Key:
        """Publish a new key in place of the old ones (which stop being served)."""
        self.keys = [Key.new()]
        return self.keys[0]

    def token(
        self,
        subject: str,
        *,
        audience: str,
        key: Key | None = None,
        lifetime: float = 300,
        **claims: Any,
    ) -> str:
        key = key or self.keys[0]
        now = int(time.time())
        payload = {
            "iss": self.issuer,
            "sub": subject,
            "aud": audience,
            "iat": now,
            "exp": now + int(lifetime),
            **claims,
        }
        return jwt.encode(payload, key.private, algorithm="ES256", headers={"kid": key.kid})

    def stop(self) -> None:
        self.server.stop()
