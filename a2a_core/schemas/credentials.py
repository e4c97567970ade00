"""The credential the hub calls an endpoint agent with, in a form its card declares
(`securitySchemes`): HTTP bearer, an API key (header, query parameter or cookie), or OAuth2
client credentials. Mutual TLS and OpenID Connect are declared by some cards and not supported.

`credential_for_card` checks what an admin gives against the card and returns the
`Credential` to seal; the secret never appears in a message, a repr or a log line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from a2a_core.errors import FieldProblem, ValidationFailed

Kind = Literal["bearer", "apiKey", "oauth2"]
KINDS: tuple[Kind, ...] = ("bearer", "apiKey", "oauth2")
API_KEY_LOCATIONS = ("header", "query", "cookie")
MAX_SECRET = 8192
MAX_SCHEME_NAME = 100
MAX_SCOPES = 50
# A header name (RFC 9110 token) and a query or cookie name: no separators, no controls.
_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,200}$")
# What may go in a header value or a form field: visible ASCII and spaces, no line breaks.
_SENDABLE = re.compile(r"^[\x20-\x7e]+$")
_SCOPE = re.compile(r"^[\x21\x23-\x5b\x5d-\x7e]{1,200}$")  # RFC 6749 scope-token


@dataclass(frozen=True)
class Credential:
    """A credential for one agent. `secret` is the bearer token, the API key or the OAuth2
    client secret; `repr` leaves it out."""

    scheme: str
    kind: Kind
    secret: str = field(repr=False)
    location: str = ""  # apiKey: header | query | cookie
    name: str = ""  # apiKey: the header, parameter or cookie name
    token_url: str = ""  # oauth2
    client_id: str = ""  # oauth2
    scopes: tuple[str, ...] = ()  # oauth2

    def sealable(self) -> dict[str, Any]:
        return {
            "scheme": self.scheme,
            "kind": self.kind,
            "secret": self.secret,
            "location": self.location,
            "name": self.name,
            "tokenUrl": self.token_url,
            "clientId": self.client_id,
            "scopes": list(self.scopes),
        }

    @classmethod
    def from_sealed(cls, data: dict[str, Any]) -> Credential:
        kind = data.get("kind")
        if kind not in KINDS:
            raise ValueError("not a credential this hub sealed")
        return cls(
            scheme=str(data.get("scheme", "")),
            kind=kind,
            secret=str(data.get("secret", "")),
            location=str(data.get("location", "")),
            name=str(data.get("name", "")),
            token_url=str(data.get("tokenUrl", "")),
            client_id=str(data.get("clientId", "")),
            scopes=tuple(str(s) for s in data.get("scopes") or ()),
        )

    @property
    def described(self) -> str:
        """The scheme in words, for pages and errors (never the secret)."""
        if self.kind == "apiKey":
            return f"{self.scheme} (API key in {self.location} {self.name!r})"
        if self.kind == "oauth2":
            return f"{self.scheme} (OAuth2 client credentials, client {self.client_id!r})"
        return f"{self.scheme} (HTTP bearer)"


def declared_schemes(card: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The card's `securitySchemes` (1.0 form: a wrapper field per kind), the well-formed ones."""
    schemes = card.get("securitySchemes")
    if not isinstance(schemes, dict):
        return {}
    return {str(k): v for k, v in schemes.items() if isinstance(v, dict)}


def scheme_kind(scheme: dict[str, Any]) -> str:
    """What a declared scheme is, in this module's words ('' when it is none the hub sends)."""
    http = scheme.get("httpAuthSecurityScheme")
    if isinstance(http, dict) and str(http.get("scheme", "")).lower() == "bearer":
        return "bearer"
    if isinstance(scheme.get("apiKeySecurityScheme"), dict):
        return "apiKey"
    if isinstance(scheme.get("oauth2SecurityScheme"), dict):
        return "oauth2"
    if "mtlsSecurityScheme" in scheme:
        return "mutualTLS"
    if "openIdConnectSecurityScheme" in scheme:
        return "openIdConnect"
    if isinstance(http, dict):
        return f"http {str(http.get('scheme', ''))[:40]!r}"
    return "unknown"


def credential_for_card(
    card: dict[str, Any],
    *,
    scheme: str | None,
    secret: str,
    client_id: str = "",
    token_url: str = "",
    scopes: list[str] | None = None,
) -> Credential:
    """The credential for the card's scheme `scheme` (or its only one), checked: every problem
    is named (the secret only by its length and kind of fault)."""
    declared = declared_schemes(card)
    problems: list[FieldProblem] = []
    if not declared:
        raise ValidationFailed(
            "the agent's card declares no securitySchemes: the hub calls it without a "
            "credential (re-register it with a card that declares how it must be called)"
        )
    usable = {n: s for n, s in declared.items() if scheme_kind(s) in KINDS}
    if scheme is None:
        if len(declared) != 1:
            raise ValidationFailed(
                "the card declares several schemes: choose one with --scheme ("
                + ", ".join(f"{n}: {scheme_kind(s)}" for n, s in sorted(declared.items())[:20])
                + ")"
            )
        scheme = next(iter(declared))
    if len(scheme) > MAX_SCHEME_NAME or scheme not in declared:
        shown = scheme[:MAX_SCHEME_NAME] + ("…" if len(scheme) > MAX_SCHEME_NAME else "")
        raise ValidationFailed(
            f"the card declares no scheme {shown!r}",
            [FieldProblem("scheme", "one of: " + ", ".join(sorted(declared)[:20]))],
        )
    if scheme not in usable:
        kind = scheme_kind(declared[scheme])
        why = {
            "mutualTLS": "mutual TLS (client certificates) is not supported",
            "openIdConnect": "OpenID Connect is not supported; if the provider offers "
            "client credentials, declare it as an oauth2 scheme",
        }.get(kind, f"{kind} is not a scheme the hub can send")
        raise ValidationFailed(
            f"scheme {scheme!r}: {why}",
            [FieldProblem("scheme", "supported: HTTP bearer, API key, OAuth2 client credentials")],
        )
    body = declared[scheme]
    kind = scheme_kind(body)
    if not secret:
        problems.append(FieldProblem("secret", "is empty"))
    elif len(secret) > MAX_SECRET:
        problems.append(FieldProblem("secret", f"is longer than {MAX_SECRET} characters"))
    elif not _SENDABLE.match(secret):
        problems.append(
            FieldProblem("secret", "holds a line break or other character a header cannot carry")
        )
    location = name = ""
    found_url, wanted = "", tuple(scopes or ())
    if kind == "apiKey":
        key = body["apiKeySecurityScheme"]
        location, name = str(key.get("location", "")).lower(), str(key.get("name", ""))
        if location not in API_KEY_LOCATIONS:
            problems.append(
                FieldProblem("scheme", f"its location {location[:40]!r} is not header/query/cookie")
            )
        if not _NAME.match(name):
            problems.append(FieldProblem("scheme", f"its key name {name[:40]!r} is not usable"))
    if kind == "oauth2":
        flows = body["oauth2SecurityScheme"].get("flows")
        flow = flows.get("clientCredentials") if isinstance(flows, dict) else None
        if not isinstance(flow, dict):
            raise ValidationFailed(
                f"scheme {scheme!r} declares no OAuth2 clientCredentials flow (the only flow a "
                "hub can use without a person)"
            )
        found_url = token_url or str(flow.get("tokenUrl", ""))
        parts = urlsplit(found_url)
        if parts.scheme not in ("http", "https") or not parts.netloc or len(found_url) > 2000:
            problems.append(FieldProblem("tokenUrl", "must be an http(s) URL"))
        if not client_id:
            problems.append(FieldProblem("clientId", "is required for OAuth2"))
        elif len(client_id) > 500 or not _SENDABLE.match(client_id):
            problems.append(FieldProblem("clientId", "is too long or holds a line break"))
        if len(wanted) > MAX_SCOPES:
            problems.append(FieldProblem("scopes", f"more than {MAX_SCOPES}"))
        for scope in wanted[:MAX_SCOPES]:
            if not _SCOPE.match(scope):
                problems.append(FieldProblem("scopes", f"{scope[:40]!r} is not an OAuth2 scope"))
    elif client_id or token_url or wanted:
        problems.append(FieldProblem("clientId", "client id, token URL and scopes are OAuth2's"))
    if problems:
        raise ValidationFailed(f"cannot set a credential for scheme {scheme!r}", problems)
    return Credential(
        scheme=scheme,
        kind=kind,  # type: ignore[arg-type]
        secret=secret,
        location=location,
        name=name,
        token_url=found_url,
        client_id=client_id,
        scopes=wanted,
    )
