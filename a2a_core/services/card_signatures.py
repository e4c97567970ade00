"""Signatures on the cards agents register: a card that carries `signatures` is registered
only when one of them verifies with a key the operator trusts. It fails closed.

Which keys count:
- signers pinned (HUB_CARD_SIGNER_JWKS): the keys of those JWKS only, looked up by each
  signature's `kid`. The `jku` a signature names is never fetched, so a card signed with any
  other key (an attacker's, published at a `jku` of their own) does not verify.
- none pinned: no key, unless HUB_CARD_SIGNER_FOLLOW_JKU is on; then the JWKS a signature's
  own `jku` names, over https only. A key found there shows only that whoever controls that
  URL signed the card, which anyone who can write a card can arrange: hence off by default.

A card none of whose signatures verifies is refused (`ValidationFailed`, one problem per
signature saying why): no trusted JWKS holds its key, the JWKS could not be read, the
signature does not verify with the key found (the card was changed after it was signed), or
it is not a signature the hub can read (not base64url, its protected header not a JSON
object, `kid` or `jku` not a string, `alg` not one of ALGORITHMS), or the card carries more
than MAX_SIGNATURES. HUB_CARD_ALLOW_UNVERIFIED registers, with a note saying why, a card
none of whose signatures could be checked (no trusted key found for any); a signature that
is unreadable or does not verify with a trusted key is refused whatever the setting.

Fetching a JWKS blocks (up to HUB_JWKS_TIMEOUT, through `a2a_core.jwks`): registration is an
operator's action.
"""

from __future__ import annotations

import binascii
import json
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import jwt
from a2a.compat.v0_3.types import AgentCard as V03AgentCard
from a2a.types.a2a_pb2 import AgentCard
from a2a.utils.signing import SignatureVerificationError, create_signature_verifier
from django.conf import settings
from jwt import PyJWK
from jwt.exceptions import PyJWTError
from jwt.utils import base64url_decode, base64url_encode
from pydantic import ValidationError

from a2a_core import jwks
from a2a_core.errors import FieldProblem, ValidationFailed

ALGORITHMS = ["ES256", "ES384", "ES512", "RS256", "RS384", "RS512", "PS256", "EdDSA"]
# Each signature may cost a JWKS fetch; a card has one or two in practice.
MAX_SIGNATURES = 8
_BASE64URL = re.compile(r"[A-Za-z0-9_-]+")

Verifies = Callable[[PyJWK], bool]


class _Unchecked(Exception):
    """No trusted key could be found to check a signature; the message says why."""


class _Wrong(Exception):
    """A signature is unreadable, or does not verify with a trusted key; the message says
    why."""


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _header(protected: str, signature: str) -> dict[str, Any]:
    """A signature's protected header, its parts checked for what the hub reads."""
    if not _BASE64URL.fullmatch(protected):
        raise _Wrong("its protected header is not base64url")
    if not _BASE64URL.fullmatch(signature):
        raise _Wrong("its signature is not base64url")
    try:
        header = json.loads(base64url_decode(protected.encode()))
    except (binascii.Error, ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        raise _Wrong("its protected header is not base64url-encoded JSON") from None
    if not isinstance(header, dict):
        raise _Wrong(f"its protected header is not a JSON object, got {type(header).__name__}")
    for name, longest in (("kid", 256), ("jku", 2000)):
        if name in header and not isinstance(header[name], str):
            raise _Wrong(
                f"its protected header's {name!r} must be a string, "
                f"got {type(header[name]).__name__}"
            )
        if len(header.get(name) or "") > longest:
            raise _Wrong(f"its protected header's {name!r} is over {longest} characters")
    alg = header.get("alg")
    if not isinstance(alg, str) or alg not in ALGORITHMS:
        raise _Wrong(f"its alg {_shown(alg)} is not one of {', '.join(ALGORITHMS)}")
    return header


def _key_sources(jku: str | None) -> list[str]:
    """The JWKS URLs whose keys may verify a signature naming `jku` (see the module
    docstring); `_Unchecked` when there are none."""
    pinned = list(settings.HUB_CARD_SIGNER_JWKS)
    if pinned:
        return pinned
    if not settings.HUB_CARD_SIGNER_FOLLOW_JKU:
        raise _Unchecked(
            "no card signer is trusted: HUB_CARD_SIGNER_JWKS is empty, and a signature's own "
            "jku is followed only with HUB_CARD_SIGNER_FOLLOW_JKU"
        )
    if jku is None:
        raise _Unchecked("it names no JWKS (jku) and HUB_CARD_SIGNER_JWKS is empty")
    try:
        parts = urlsplit(jku)
    except ValueError:
        parts = None
    if parts is None or parts.scheme != "https" or not parts.hostname:
        raise _Unchecked(f"its jku {_shown(jku)} is not an https URL, the only kind followed")
    return [jku]


def _check_one(protected: str, signature: str, verifies: Verifies) -> str:
    """Which trusted key verifies this signature ("kid ... from <JWKS URL>"); raises `_Wrong`
    or `_Unchecked` saying why none does."""
    header = _header(protected, signature)
    kid = header.get("kid")
    sources = _key_sources(header.get("jku"))
    missing: list[str] = []
    wrong: list[str] = []
    for url in sources:
        try:
            key = jwks.signing_key(url, kid)
        except (jwks.KeyNotFound, jwks.JwksUnavailable) as exc:
            missing.append(str(exc))
            continue
        if verifies(key):
            return f"kid {kid!r} from {url}"
        wrong.append(
            f"it does not verify with kid {kid!r} from {url}: the card was changed after it "
            "was signed, or signed with another key"
        )
    if wrong:
        raise _Wrong("; ".join(wrong))
    pinned = "no pinned signer (HUB_CARD_SIGNER_JWKS) holds its key: "
    raise _Unchecked((pinned if settings.HUB_CARD_SIGNER_JWKS else "") + "; ".join(missing))


def _v10_verifier(card: AgentCard, index: int) -> Verifies:
    """Whether a key verifies signature `index` over the A2A 1.0 card, as the a2a-sdk's
    own verifier checks it."""
    alone = AgentCard()
    alone.CopyFrom(card)
    del alone.signatures[:]
    alone.signatures.append(card.signatures[index])

    def verifies(key: PyJWK) -> bool:
        try:
            create_signature_verifier(lambda kid, jku: key, ALGORITHMS)(alone)
        except SignatureVerificationError:
            return False
        return True

    return verifies


def _clean_empty(value: Any) -> Any:
    """Drop empty strings, lists and objects, recursively (None when nothing is left)."""
    if isinstance(value, dict):
        cleaned = {k: c for k, v in value.items() if (c := _clean_empty(v)) is not None}
        return cleaned or None
    if isinstance(value, list):
        items = [c for v in value if (c := _clean_empty(v)) is not None]
        return items or None
    return None if value == "" else value


def _v03_verifier(payload: str, protected: str, signature: str) -> Verifies:
    """Whether a key verifies a signature over the 0.3 card's canonical `payload`."""

    def verifies(key: PyJWK) -> bool:
        try:
            jwt.decode(f"{protected}.{payload}.{signature}", key=key, algorithms=ALGORITHMS)
        except PyJWTError:
            return False
        return True

    return verifies


def _at_most(count: int) -> None:
    if count > MAX_SIGNATURES:
        raise ValidationFailed(
            f"the card carries {count} signatures; the hub checks at most {MAX_SIGNATURES}",
            [FieldProblem("signatures", f"at most {MAX_SIGNATURES} signatures")],
        )


def _signatures(card: AgentCard, legacy: dict[str, Any] | None) -> list[tuple[str, str, Verifies]]:
    """Each signature as (protected, signature, its verifier). A 0.3 card's are checked
    over the 0.3 card as the a2a-sdk 0.3 canonicalizes it (its pydantic model without
    defaults, empty values dropped, keys sorted). Raises `ValidationFailed` past
    MAX_SIGNATURES."""
    if legacy is None:
        _at_most(len(card.signatures))
        return [
            (s.protected, s.signature, _v10_verifier(card, i))
            for i, s in enumerate(card.signatures)
        ]
    try:
        old = V03AgentCard.model_validate(legacy)
    except ValidationError:  # check_card has read it already; a second reading may not differ
        raise ValidationFailed(
            "the card's signatures are malformed",
            [FieldProblem("signatures", "the A2A 0.3 card does not validate")],
        ) from None
    _at_most(len(old.signatures or []))
    dumped = old.model_dump(
        exclude={"signatures"}, exclude_defaults=True, exclude_none=True, by_alias=True
    )
    canonical = json.dumps(_clean_empty(dumped), separators=(",", ":"), sort_keys=True)
    payload = base64url_encode(canonical.encode()).decode()
    return [
        (s.protected, s.signature, _v03_verifier(payload, s.protected, s.signature))
        for s in old.signatures or []
    ]


def card_signatures_check(*, card: AgentCard, legacy: dict[str, Any] | None = None) -> str | None:
    """Check a card's signatures (`legacy`: the A2A 0.3 card it was converted from, whose
    signatures cover the 0.3 form). None when it has none; a sentence for the operator
    naming the key that verified it (or, with HUB_CARD_ALLOW_UNVERIFIED, why none could be
    checked). Raises `ValidationFailed` with a problem per signature when none verifies."""
    signatures = _signatures(card, legacy)
    if not signatures:
        return None
    count = len(signatures)
    wrong: list[FieldProblem] = []
    unchecked: list[FieldProblem] = []
    for i, (protected, signature, verifier) in enumerate(signatures):
        try:
            found = _check_one(protected, signature, verifier)
        except _Wrong as exc:
            wrong.append(FieldProblem(f"signatures[{i}]", str(exc)))
        except _Unchecked as exc:
            unchecked.append(FieldProblem(f"signatures[{i}]", str(exc)))
        else:
            return f"its signature verifies ({found})"
    if wrong:
        raise ValidationFailed(
            f"the card's signature does not verify (none of its {count} signature(s))",
            wrong + unchecked,
        )
    if settings.HUB_CARD_ALLOW_UNVERIFIED:
        reasons = "; ".join(problem.message for problem in unchecked)
        return f"its {count} signature(s) were not checked (HUB_CARD_ALLOW_UNVERIFIED): {reasons}"
    raise ValidationFailed(
        f"the card's signature cannot be verified (none of its {count} signature(s)): a "
        "signed card is registered only when a trusted key verifies it",
        unchecked,
    )
