"""Agents that sign in with their own identity provider: a bearer token that is a JWT (and
not a hub token) is checked against the issuer an admin trusted (`a2a issuer add`).

The token's signature must verify with a key of the issuer's JWKS (found by `kid`; fetched
and cached by `a2a_core.jwks`, single-flight and time-bounded, on no thread the hub needs
elsewhere), and its `exp`, `aud` and `iss` must hold; then one of the issuer's mappings (a
claim, `sub` by default, equal to a value) names the agent it is. Each refusal says why, in
the error's message and as a short code in its metadata (`jwt`): `malformed`,
`untrusted_issuer`, `unknown_key`, `bad_signature`, `expired`, `not_yet_valid`,
`wrong_audience`, `wrong_issuer`, `missing_claim`, `unknown_subject`; an issuer whose JWKS
cannot be had is IdentityProviderUnavailableError (503, `jwks_unavailable`). Whatever the token
holds (any JSON type in its header or claims, any characters), the answer is one of these,
never another exception; each refusal is one WARNING line, rate-limited per code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import jwt
from jwt import PyJWK
from jwt.exceptions import (
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
from a2a_core.jwks import quoted
from a2a_core.logging import get_logger, warn_limited
from a2a_core.models import Agent, IssuerMapping, TrustedIssuer
from a2a_core.protocol.errors import IdentityProviderUnavailableError, UnauthenticatedError
from a2a_core.schemas.a2a import holds_lone_surrogate
from a2a_core.tokens import TOKEN_PREFIX

log = get_logger("identity")

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


# RFC 7515's compact form: three base64url parts, without padding.
_COMPACT = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")
# PyJWT raises its own errors for what it expects to go wrong; claims of a type it does not
# expect can still surface as builtin ones from inside it.
_UNREADABLE = (PyJWTError, ValueError, TypeError, OverflowError)
_ISSUER_LENGTH = TrustedIssuer._meta.get_field("issuer").max_length or 500


def _refused(code: str, message: str) -> UnauthenticatedError:
    # PyJWT's messages quote what the token holds, lone surrogates included: escaped, as no
    # answer in UTF-8 can carry them.
    text = message.encode("utf-8", "backslashreplace").decode()
    return UnauthenticatedError(text, {"jwt": code})


def _trust(issuer: str) -> Trust | None:
    row = TrustedIssuer.objects.filter(issuer=issuer).first()
    if row is None:
        return None
    mappings = IssuerMapping.objects.filter(issuer=row).values_list("claim", "value", "agent__slug")
    return Trust(row.issuer, row.jwks_url, row.audience, tuple(mappings))


def _unverified(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The token's header and claims, unverified; refused as `malformed` if unreadable."""
    if not _COMPACT.fullmatch(token):
        raise _refused(
            "malformed",
            "the bearer token is not a hub token nor a JWT: a JWT is three base64url parts "
            "without padding, separated by dots (RFC 7515)",
        )
    try:
        header = jwt.get_unverified_header(token)
        claims = jwt.decode(token, options={"verify_signature": False})
    except _UNREADABLE as exc:
        raise _refused(
            "malformed", f"the bearer token is not a hub token nor a JWT: {exc}"
        ) from None
    return header, claims


def _issuer(claims: dict[str, Any]) -> str:
    """The token's `iss`, when it is text a trusted issuer could be named by."""
    issuer = claims.get("iss")
    if issuer is None:
        raise _refused("missing_claim", "the token has no 'iss' claim naming its issuer")
    if not isinstance(issuer, str):
        raise _refused(
            "malformed", f"the token's 'iss' claim is a {type(issuer).__name__}, not a string"
        )
    if len(issuer) > _ISSUER_LENGTH or "\x00" in issuer or holds_lone_surrogate(issuer):
        # No issuer could have been trusted under such a name (nor can the database be asked).
        raise _refused(
            "untrusted_issuer", f"the token's issuer {quoted(issuer)} is not trusted by this hub"
        )
    return issuer


async def _key(trust: Trust, kid: str | None) -> PyJWK:
    try:
        key = await jwks.asigning_key(trust.jwks_url, kid)
    except jwks.KeyNotFound:
        raise _refused(
            "unknown_key",
            f"the token is signed with a key (kid {quoted(kid)}) that its issuer {trust.issuer} "
            f"does not publish at {trust.jwks_url}",
        ) from None
    except jwks.JwksUnavailable as exc:
        raise IdentityProviderUnavailableError(
            f"cannot check the token: {exc}", {"jwt": "jwks_unavailable"}
        ) from None
    if key.algorithm_name not in ALGORITHMS:
        raise _refused(
            "unknown_key",
            f"the key {quoted(kid)} of {trust.issuer} is for {key.algorithm_name}; the hub "
            "accepts public-key signatures only",
        )
    return key


def _verify(token: str, trust: Trust, key: PyJWK, kid: str | None) -> dict[str, Any]:
    """The token's claims once its signature, expiry, audience and issuer hold."""
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
        raise _refused("expired", f"the token expired at {_moment(expired)}") from None
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
            f"the token's signature does not verify with {trust.issuer}'s key {quoted(kid)}",
        ) from None
    except _UNREADABLE as exc:
        raise _refused("malformed", f"the token cannot be read as a JWT: {exc}") from None


def _moment(timestamp: object) -> str:
    try:
        return datetime.fromtimestamp(int(timestamp), UTC).isoformat()  # type: ignore[call-overload]
    except (TypeError, ValueError, OverflowError, OSError):
        return quoted(timestamp)


def _agent_slug(claims: dict[str, Any], trust: Trust) -> str:
    for claim, value, slug in trust.mappings:
        if claims.get(claim) == value:
            return slug
    subject = claims.get("sub")
    raise _refused(
        "unknown_subject",
        f"the token of {trust.issuer} for subject {quoted(subject)} maps to no agent at this "
        f"hub (an admin maps it with: a2a issuer add {trust.issuer} ... --agent SLUG)",
    )


async def agent_for_jwt(token: str) -> Agent:
    """The agent a JWT from a trusted identity provider signs in as. Raises the A2A error to
    answer with: UnauthenticatedError saying why (metadata `jwt`), or
    IdentityProviderUnavailableError (503) when the issuer's JWKS cannot be had within
    HUB_JWKS_TIMEOUT (at once while its last failure is remembered)."""
    try:
        return await _agent_for_jwt(token)
    except UnauthenticatedError as refused:
        code = refused.data.get("jwt", "") if isinstance(refused.data, dict) else ""
        warn_limited(log, f"jwt {code}", f"a JWT was refused ({code}): {refused.message}")
        raise


async def _agent_for_jwt(token: str) -> Agent:
    header, claims = _unverified(token)
    issuer = _issuer(claims)
    trust = await db(_trust, issuer)
    if trust is None:
        raise _refused(
            "untrusted_issuer",
            f"the token's issuer {quoted(issuer)} is not trusted by this hub (an admin trusts "
            "it with: a2a issuer add)",
        )
    kid = header.get("kid")  # a string when present: PyJWT refuses any other type
    claims = _verify(token, trust, await _key(trust, kid), kid)
    slug = _agent_slug(claims, trust)
    agent = agent_cache.cached(slug=slug) or await db(agent_cache.agent_by_slug, slug)
    if agent is None:  # deleted since the mapping was read
        raise _refused("unknown_subject", f"the agent {slug!r} is no longer registered")
    return agent
