"""Bearer tokens the hub issues to agents: 256 random bits, stored only as a SHA-256 digest."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping

TOKEN_PREFIX = "a2ah_"


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    # The token is random and long, so a fast hash is as good as a slow one here.
    return hashlib.sha256(token.encode()).hexdigest()


def token_prefix(token: str) -> str:
    """The first characters, so humans can tell tokens apart without seeing them."""
    return token[: len(TOKEN_PREFIX) + 6]


def bearer_token(headers: Mapping[str, str]) -> str | None:
    """The token of an `Authorization: Bearer ...` header: None without the header, '' when
    it has another scheme."""
    value = headers.get("authorization")
    if value is None:
        return None
    scheme, _, token = value.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""
