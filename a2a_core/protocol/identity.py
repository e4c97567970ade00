"""Agents that sign in with their own identity provider: a bearer token that is a JWT (and
not a hub token) is checked against the issuer an admin trusted (`a2a issuer add`).

The token's signature must verify with a key of the issuer's JWKS (found by `kid`, fetched
and cached by `a2a_core.jwks`, on a worker thread: never on the event loop), and its `exp`,
`aud` and `iss` must hold; then one of the issuer's mappings (a claim, `sub` by default, equal
to a value) names the agent it is. Each refusal says why, in the error's message and as a
short code in its metadata (`jwt`): `malformed`, `untrusted_issuer`, `unknown_key`,
`bad_signature`, `expired`, `not_yet_valid`, `wrong_audience`, `wrong_issuer`,
`missing_claim`, `unknown_subject`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import jwt
from jwt.exceptions import (
    DecodeError,
    ExpiredSignatureError,
    ImmatureSignatureError,
    InvalidAudienceError,
    InvalidIssuerError,
    InvalidSignatureError,
    MissingRequiredClaimError,
    PyJWTError,
)

from a2a_core import agent_cache, jwks
from a2a_core.asyncdb import db
from a2a_core.models import Agent, IssuerMapping, TrustedIssuer
from a2a_core.protocol.errors import IdentityProviderUnavailableError, UnauthenticatedError
from a2a_core.tokens import TOKEN_PREFIX

# Public-key algorithms only: a JWKS is public, so a symmetric key in it proves nothing.
ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)


def looks_like_jwt(token: str) -> bool:
    """A compact JWS (three dot-separated parts) that is not a hub token."""
    return not token.startswith(TOKEN_PREFIX) and token.count(".") == 2


@dataclass(frozen=True)
class Trust:
    """A trusted issuer and its mappings (claim, value, agent slug), read once per call."""

    issuer: str
    jwks_url: str
    audience: str
    mappings: tuple[tuple[str, str, str], ...]


def _refused(code: str, message: str) -> UnauthenticatedError:
    return UnauthenticatedError(message, {"jwt": code})


def _trust(issuer: str) -> Trust | None:
    row = TrustedIssuer.objects.filter(issuer=issuer).first()
    if row is None:
        return None
    mappings = IssuerMapping.objects.filter(issuer=row).values_list("claim", "value", "agent__slug")
    return Trust(row.issuer, row.jwks_url, row.audience, tuple(mappings))


def _verify(token: str, trust: Trust, kid: str | None) -> dict[str, Any]:
    """The token's claims once its signature, expiry, audience and issuer hold (blocking: the
    issuer's JWKS may have to be fetched)."""
    try:
        key = jwks.signing_key(trust.jwks_url, kid)
    except jwks.KeyNotFound:
        raise _refused(
            "unknown_key",
            f"the token is signed with a key (kid {kid!r}) that its issuer {trust.issuer} does "
            f"not publish at {trust.jwks_url}",
        ) from None
    except jwks.JwksUnavailable as exc:
        raise IdentityProviderUnavailableError(
            f"cannot check the token: {exc}", {"jwt": "jwks_unavailable"}
        ) from None
    if key.algorithm_name not in ALGORITHMS:
        raise _refused(
            "unknown_key",
            f"the key {kid!r} of {trust.issuer} is for {key.algorithm_name}; the hub accepts "
            "public-key signatures only",
        )
    try:
        return jwt.decode(
            token,
            key,
            algorithms=[key.algorithm_name],
            audience=trust.audience,
            issuer=trust.issuer,
            options={"require": ["exp", "iss", "aud"]},
        )
    except ExpiredSignatureError:
        expired = jwt.decode(token, options={"verify_signature": False}).get("exp")
        at = datetime.fromtimestamp(expired, UTC).isoformat() if isinstance(expired, int) else "?"
        raise _refused("expired", f"the token expired at {at}") from None
    except ImmatureSignatureError:
        raise _refused(
            "not_yet_valid", "the token is not valid yet (nbf/iat in the future)"
        ) from None
    except InvalidAudienceError:
        raise _refused(
            "wrong_audience",
            f"the token's audience is not {trust.audience!r}, the one this hub accepts from "
            f"{trust.issuer}",
        ) from None
    except InvalidIssuerError:
        raise _refused("wrong_issuer", f"the token's issuer is not {trust.issuer!r}") from None
    except MissingRequiredClaimError as exc:
        raise _refused("missing_claim", f"the token has no {exc.claim!r} claim") from None
    except InvalidSignatureError:
        raise _refused(
            "bad_signature",
            f"the token's signature does not verify with {trust.issuer}'s key {kid!r}",
        ) from None
    except PyJWTError as exc:
        raise _refused("malformed", f"the token cannot be read as a JWT: {exc}") from None


def _agent_slug(claims: dict[str, Any], trust: Trust) -> str:
    for claim, value, slug in trust.mappings:
        if claims.get(claim) == value:
            return slug
    subject = claims.get("sub")
    raise _refused(
        "unknown_subject",
        f"the token of {trust.issuer} for subject {subject!r} maps to no agent at this hub "
        f"(an admin maps it with: a2a issuer add {trust.issuer} ... --agent SLUG)",
    )


async def agent_for_jwt(token: str) -> Agent:
    """The agent a JWT from a trusted identity provider signs in as. Raises the A2A error to
    answer with: UnauthenticatedError saying why (metadata `jwt`), or
    IdentityProviderUnavailableError (503) when the issuer's JWKS cannot be fetched."""
    try:
        header = jwt.get_unverified_header(token)
        unverified = jwt.decode(token, options={"verify_signature": False})
    except DecodeError as exc:
        raise _refused(
            "malformed", f"the bearer token is not a hub token nor a JWT: {exc}"
        ) from None
    issuer = unverified.get("iss")
    if not isinstance(issuer, str):
        raise _refused("missing_claim", "the token has no 'iss' claim naming its issuer")
    trust = await db(_trust, issuer)
    if trust is None:
        raise _refused(
            "untrusted_issuer",
            f"the token's issuer {issuer!r} is not trusted by this hub (an admin trusts it "
            "with: a2a issuer add)",
        )
    kid = header.get("kid")
    claims = await asyncio.to_thread(_verify, token, trust, kid if isinstance(kid, str) else None)
    slug = _agent_slug(claims, trust)
    agent = agent_cache.cached(slug=slug) or await db(agent_cache.agent_by_slug, slug)
    if agent is None:  # deleted since the mapping was read
        raise _refused("unknown_subject", f"the agent {slug!r} is no longer registered")
    return agent
