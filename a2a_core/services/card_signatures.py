"""Signatures on the cards agents register: a card that carries `signatures` must carry one
that verifies, when its signer's keys can be found.

The keys are looked up by the signature's `kid` in the JWKS its protected header names
(`jku`) and in the JWKS URLs configured in HUB_CARD_SIGNER_JWKS. A card none of whose
signatures verifies with a key found that way is refused (it was changed after it was
signed, or signed with another key), and so is one whose signer's JWKS lacks its `kid`; a card
whose signer's JWKS cannot be read at all is registered, and the registration says that its
signatures were not checked and why.
Fetching a JWKS blocks (up to HUB_JWKS_TIMEOUT): registration is an operator's action.
"""

from __future__ import annotations

import binascii
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jwt
from a2a.compat.v0_3.types import AgentCard as V03AgentCard
from a2a.types.a2a_pb2 import AgentCard
from a2a.utils.signing import (
    InvalidSignaturesError,
    SignatureVerificationError,
    create_signature_verifier,
)
from django.conf import settings
from jwt import PyJWK
from jwt.exceptions import PyJWKError, PyJWTError
from jwt.utils import base64url_decode, base64url_encode

from a2a_core import jwks
from a2a_core.errors import FieldProblem, ValidationFailed

ALGORITHMS = ["ES256", "ES384", "ES512", "RS256", "RS384", "RS512", "PS256", "EdDSA"]


@dataclass
class _Lookup:
    """What looking up each signature's key found: the keys tried, the JWKS that were read but
    lack the signature's `kid`, and the JWKS that could not be read."""

    found: list[str] = field(default_factory=list)
    unknown_kid: list[str] = field(default_factory=list)
    unavailable: list[str] = field(default_factory=list)

    def key(self, kid: str | None, jku: str | None) -> PyJWK:
        urls = [jku] if jku else []
        urls += [url for url in settings.HUB_CARD_SIGNER_JWKS if url != jku]
        if not urls:
            self.unavailable.append(
                f"kid {kid!r}: the signature names no JWKS (jku) and HUB_CARD_SIGNER_JWKS is empty"
            )
        for url in urls:
            try:
                key = jwks.signing_key(url, kid)
            except jwks.KeyNotFound as exc:
                self.unknown_kid.append(str(exc))
                continue
            except jwks.JwksUnavailable as exc:
                self.unavailable.append(str(exc))
                continue
            self.found.append(f"kid {kid!r} from {url}")
            return key
        raise PyJWKError("no key")


def _has_protected_header(protected: list[str]) -> bool:
    for encoded in protected:
        try:
            header = json.loads(base64url_decode(encoded.encode()))
        except (binascii.Error, UnicodeDecodeError, ValueError):
            continue
        if isinstance(header, dict):
            return True
    return False


def _clean_empty(value: Any) -> Any:
    """Drop empty strings, lists and objects, recursively (None when nothing is left)."""
    if isinstance(value, dict):
        cleaned = {k: c for k, v in value.items() if (c := _clean_empty(v)) is not None}
        return cleaned or None
    if isinstance(value, list):
        items = [c for v in value if (c := _clean_empty(v)) is not None]
        return items or None
    return None if value == "" else value


def _verify_v03(data: dict[str, Any], key: Callable[[str | None, str | None], PyJWK]) -> None:
    """What the a2a-sdk 0.3 verifier checks: a signature over the 0.3 card as that SDK
    canonicalizes it (its pydantic model without defaults, empty values dropped, keys sorted).
    Raises InvalidSignaturesError when no signature verifies."""
    card = V03AgentCard.model_validate(data)
    dumped = card.model_dump(
        exclude={"signatures"}, exclude_defaults=True, exclude_none=True, by_alias=True
    )
    canonical = json.dumps(_clean_empty(dumped), separators=(",", ":"), sort_keys=True)
    payload = base64url_encode(canonical.encode()).decode()
    for signature in card.signatures or []:
        try:
            header = json.loads(base64url_decode(signature.protected.encode()))
        except (binascii.Error, UnicodeDecodeError, ValueError):
            continue
        if not isinstance(header, dict):
            continue
        try:
            jwt.decode(
                f"{signature.protected}.{payload}.{signature.signature}",
                key=key(header.get("kid"), header.get("jku")),
                algorithms=ALGORITHMS,
            )
        except PyJWTError:
            continue
        return
    raise InvalidSignaturesError("No valid signature found")


def card_signatures_check(*, card: AgentCard, legacy: dict[str, Any] | None = None) -> str | None:
    """Check a card's signatures (`legacy`: the A2A 0.3 card it was converted from, whose
    signatures cover the 0.3 form). None when it has none; otherwise a sentence for the
    operator saying which key verified it, or why no key could be found to check it. Raises
    `ValidationFailed` when keys were found and no signature verifies with them."""
    if not card.signatures:
        return None
    count = len(card.signatures)
    if not _has_protected_header([signature.protected for signature in card.signatures]):
        raise ValidationFailed(
            "the card's signatures are malformed",
            [FieldProblem("signatures", "no signature has a readable protected header")],
        )
    lookup = _Lookup()
    try:
        if legacy is None:
            create_signature_verifier(lookup.key, ALGORITHMS)(card)
        else:
            _verify_v03(legacy, lookup.key)
    except SignatureVerificationError:
        if lookup.found or lookup.unknown_kid:
            reasons = lookup.unknown_kid + (
                [
                    f"it does not verify with {', '.join(lookup.found)}: the card was changed "
                    "after it was signed, or signed with another key"
                ]
                if lookup.found
                else []
            )
            raise ValidationFailed(
                f"the card's signature does not verify (none of its {count} signature(s))",
                [FieldProblem("signatures", reason) for reason in reasons],
            ) from None
        return f"its {count} signature(s) were not checked: " + "; ".join(lookup.unavailable)
    return f"its signature verifies ({lookup.found[-1]})"
