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
from dataclasses import dataclass, field

from a2a.types.a2a_pb2 import AgentCard
from a2a.utils.signing import SignatureVerificationError, create_signature_verifier
from django.conf import settings
from jwt import PyJWK
from jwt.exceptions import PyJWKError
from jwt.utils import base64url_decode

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


def _has_protected_header(card: AgentCard) -> bool:
    for signature in card.signatures:
        try:
            header = json.loads(base64url_decode(signature.protected.encode()))
        except (binascii.Error, UnicodeDecodeError, ValueError):
            continue
        if isinstance(header, dict):
            return True
    return False


def card_signatures_check(*, card: AgentCard) -> str | None:
    """Check a card's signatures. None when it has none; otherwise a sentence for the operator
    saying which key verified it, or why no key could be found to check it. Raises
    `ValidationFailed` when keys were found and no signature verifies with them."""
    if not card.signatures:
        return None
    count = len(card.signatures)
    if not _has_protected_header(card):
        raise ValidationFailed(
            "the card's signatures are malformed",
            [FieldProblem("signatures", "no signature has a readable protected header")],
        )
    lookup = _Lookup()
    verify = create_signature_verifier(lookup.key, ALGORITHMS)
    try:
        verify(card)
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
