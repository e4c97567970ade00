"""A real identity provider for tests: signing keys made in the test, their JWKS served over
HTTP on 127.0.0.1 (rotatable), and JWTs signed with them; or, when told to misbehave, a JWKS
endpoint that answers junk, hangs or dribbles (`JUNK_ANSWERS`, `hang`, `dribble`)."""

from __future__ import annotations

import asyncio
import base64
import functools
import gzip
import json
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec
from jwt.algorithms import ECAlgorithm
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route

from a2a_core.asyncdb import db
from a2a_core.services.identity import issuer_trust
from tests.servers import ServerThread

# The audience the tests' trusted issuers give.
AUDIENCE = "https://hub.example/a2a"

Answer = Callable[[Request], Awaitable[Response]]


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
        # What GET /jwks.json answers instead of the keys, while set.
        self.misbehave: Answer | None = None
        self.server = ServerThread(
            Starlette(routes=[Route("/jwks.json", self._jwks)]), lifespan="off"
        ).start()
        self.issuer = self.server.url
        self.jwks_url = f"{self.server.url}/jwks.json"

    async def _jwks(self, request: Request) -> JSONResponse:
        self.fetches += 1
        if self.misbehave is not None:
            return await self.misbehave(request)
        return JSONResponse({"keys": [key.public_jwk() for key in self.keys]})

    async def trusted_for(self, agent: Any, *, subject: str = "robot-client") -> None:
        """The hub trusts this provider (audience AUDIENCE); its tokens for `subject` sign in
        as `agent`."""
        await db(
            issuer_trust,
            issuer=self.issuer,
            jwks_url=self.jwks_url,
            audience=AUDIENCE,
            agent=agent,
            value=subject,
        )

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

    def raw_token(self, header: Any, claims: Any, *, key: Key | None = None) -> str:
        """A JWS over any JSON as its header and claims (NaN and Infinity included), signed
        with `key` (ES256), so that only what it holds can be wrong with it."""
        key = key or self.keys[0]
        signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
        signature = ECAlgorithm(ECAlgorithm.SHA256).sign(signing_input.encode(), key.private)
        return f"{signing_input}.{_b64(signature)}"

    def stop(self) -> None:
        self.server.stop()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


async def hang(request: Request) -> Response:
    """Takes the request and never answers, until the client goes away."""
    while (await request.receive())["type"] != "http.disconnect":
        pass
    return Response()


async def dribble(request: Request) -> Response:
    """Answers at once, then sends the body one byte every 0.2 s, forever: each read is quick,
    the whole never comes."""

    async def body() -> Any:
        yield b'{"keys": ['
        while True:
            await asyncio.sleep(0.2)
            yield b" "

    return StreamingResponse(body(), media_type="application/json")


@functools.cache
def _bomb() -> bytes:
    """5 MB of JSON in 5 KB of gzip."""
    return gzip.compress(b'{"keys": [' + b" " * 5_000_000 + b"]}")


def _answer(response: Callable[[], Response]) -> Answer:
    async def answer(request: Request) -> Response:
        return response()

    return answer


# A JWKS answer that is no key set -> what the hub's refusal says of it.
JUNK_ANSWERS: dict[str, tuple[Answer, str]] = {
    "an HTML login page": (
        _answer(lambda: HTMLResponse("<html><body><form>Sign in</form></body></html>")),
        "answered an HTML page, not a JSON key set",
    ),
    "text that is not JSON": (
        _answer(lambda: Response(b"keys: none", media_type="application/json")),
        "is not JSON",
    ),
    "an empty body": (_answer(lambda: Response(b"", media_type="application/json")), "is not JSON"),
    "nesting past the decoder's recursion": (
        _answer(lambda: Response(b"[" * 100_000 + b"]" * 100_000, media_type="application/json")),
        "is not JSON",
    ),
    "a JSON array": (_answer(lambda: JSONResponse([1, 2])), "is not a key set"),
    "keys that are not a list": (
        _answer(lambda: JSONResponse({"keys": {"kid": "x"}})),
        "is not a key set",
    ),
    "keys of junk members only": (
        _answer(
            lambda: JSONResponse(
                {
                    "keys": [
                        1,
                        "x",
                        None,
                        [],
                        {"kty": 5},
                        {"kty": "RSA", "n": [1], "e": "AQAB"},
                        {"kty": "OKP", "alg": ["a"]},
                        {"kty": "oct", "crv": "P-256"},
                        {"kty": "EC", "crv": "P-256", "x": 1, "y": None, "kid": "k"},
                        {"kty": "RSA", "n": "A" * 3000, "e": "AQAB", "kid": "big"},
                    ]
                }
            )
        ),
        "holds no usable signing key",
    ),
    "a body past the size limit": (
        _answer(lambda: JSONResponse({"keys": [], "padding": "x" * 2_000_000})),
        "is larger than",
    ),
    "a gzip bomb": (
        _answer(
            lambda: Response(
                _bomb(),
                media_type="application/json",
                headers={"Content-Encoding": "gzip"},
            )
        ),
        "is larger than",
    ),
    "a redirect to itself": (
        _answer(lambda: RedirectResponse("/jwks.json", status_code=302)),
        "redirects more than",
    ),
    "a redirect to a file": (
        _answer(lambda: RedirectResponse("file:///etc/passwd", status_code=302)),
        "is unreachable",
    ),
    "a server error": (
        _answer(lambda: Response(b"oops", status_code=500)),
        "answered HTTP 500",
    ),
}
