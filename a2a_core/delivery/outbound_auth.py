"""What a forward to an agent behind its own auth carries: its credential, opened from the
seal once per change, as the headers (all bindings: HTTP headers, gRPC metadata), cookie or
query parameter its card's scheme asks for; and how a refusal reads.

One per forwarder (per event loop). A credential set or rotated reaches every call as soon as
the agent is read again (`agent_cache.TTL`): the sealed blob is the cache's key, so a new one
is opened, and an OAuth2 token fetched for the old one is never sent with the new one.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import grpc
import httpx

from a2a_core.delivery.oauth2 import TokenCache, TokenUnavailable
from a2a_core.errors import AgentAuthFailed
from a2a_core.models import Agent
from a2a_core.schemas.credentials import Credential
from a2a_core.sealed import SealBroken, unseal

REFUSED_HTTP = (401, 403)
_REFUSED_GRPC = {
    grpc.StatusCode.UNAUTHENTICATED: "gRPC UNAUTHENTICATED",
    grpc.StatusCode.PERMISSION_DENIED: "gRPC PERMISSION_DENIED",
}
# How the SDK's transports word an HTTP or gRPC refusal when they keep no cause.
_REFUSED_TEXT = {
    "HTTP Error 401": "HTTP 401",
    "HTTP Error 403": "HTTP 403",
    "gRPC Error UNAUTHENTICATED": "gRPC UNAUTHENTICATED",
    "gRPC Error PERMISSION_DENIED": "gRPC PERMISSION_DENIED",
}


@dataclass(frozen=True)
class Sent:
    """One attempt's headers: with the credential (`headers`) and without (`base`), and the
    OAuth2 token among them."""

    headers: dict[str, str]
    base: dict[str, str]
    token: str = ""
    key: str = ""


class OutboundAuth:
    def __init__(self, http: httpx.AsyncClient) -> None:
        self._opened: dict[int, tuple[str, Credential]] = {}
        self.tokens = TokenCache(http)

    def credential(self, agent: Agent) -> Credential | None:
        """The agent's credential (None: it is called without one)."""
        blob = agent.credential_sealed
        if not blob:
            return None
        found = self._opened.get(agent.pk)
        if found is not None and found[0] == blob:
            return found[1]
        try:
            credential = Credential.from_sealed(unseal(blob))
        except (SealBroken, ValueError) as exc:
            raise AgentAuthFailed(
                f"cannot be called: its credential cannot be used, {exc}",
                details={"agent": agent.slug, "scheme": agent.credential_scheme},
            ) from None
        self._opened[agent.pk] = (blob, credential)
        return credential

    def params(self, agent: Agent) -> dict[str, str]:
        """The query parameters every request to the agent carries (an API key in the query)."""
        credential = self.credential(agent)
        if credential is None or credential.kind != "apiKey" or credential.location != "query":
            return {}
        return {credential.name: credential.secret}

    async def headers(self, agent: Agent, headers: dict[str, str]) -> Sent:
        """`headers` with the agent's credential added (an OAuth2 token fetched if need be)."""
        credential = self.credential(agent)
        if credential is None:
            return Sent(headers, headers)
        if credential.kind == "bearer":
            return Sent({**headers, "Authorization": f"Bearer {credential.secret}"}, headers)
        if credential.kind == "apiKey":
            if credential.location == "header":
                return Sent({**headers, credential.name: credential.secret}, headers)
            if credential.location == "cookie":
                return Sent(
                    {**headers, "Cookie": f"{credential.name}={credential.secret}"}, headers
                )
            if agent.endpoint_binding == "GRPC":
                raise failed(
                    agent, credential, "cannot be called: an API key in a query cannot go over gRPC"
                )
            return Sent(headers, headers)  # in the query: see `params`
        key = f"{agent.pk}:{hashlib.sha256(agent.credential_sealed.encode()).hexdigest()[:32]}"
        try:
            token = await self.tokens.token(key, credential)
        except TokenUnavailable as exc:
            raise failed(agent, credential, f"cannot be called: no OAuth2 token, {exc}") from None
        return Sent({**headers, "Authorization": f"Bearer {token}"}, headers, token, key)

    def retry(self, sent: Sent) -> bool:
        """After the agent refused `sent`: True when another attempt may succeed (its OAuth2
        token was refused: the next attempt fetches a new one)."""
        if not sent.token:
            return False
        self.tokens.refused(sent.key, sent.token)
        return True

    def forget(self, agents: set[int]) -> None:
        """Keep only what belongs to `agents`."""
        for pk in [pk for pk in self._opened if pk not in agents]:
            del self._opened[pk]


def refusal(exc: BaseException) -> str:
    """How the agent refused the hub's credential ('HTTP 401', ...), '' when `exc` is not that."""
    cause: BaseException | None = exc
    seen = 0
    while cause is not None and seen < 10:
        if isinstance(cause, httpx.HTTPStatusError):
            status = cause.response.status_code
            return f"HTTP {status}" if status in REFUSED_HTTP else ""
        if isinstance(cause, grpc.RpcError) and hasattr(cause, "code"):
            return _REFUSED_GRPC.get(cause.code(), "")
        text = str(cause)
        for sign, said in _REFUSED_TEXT.items():
            if text.startswith(sign):
                return said
        cause = cause.__cause__ or cause.__context__
        seen += 1
    return ""


def failed(agent: Agent, credential: Credential | None, why: str) -> AgentAuthFailed:
    """The agent-auth error, worded to follow the agent's name ("billing refused ...")."""
    scheme = credential.scheme if credential else ""
    named = f"scheme {credential.described}" if credential else "no credential is set"
    return AgentAuthFailed(f"{why} ({named})", details={"agent": agent.slug, "scheme": scheme})


def scrub(text: str, credential: Credential | None) -> str:
    """`text` (an error the SDK or the agent worded) without the credential's secret, which
    a URL with an API key in its query would show."""
    if credential is None or not credential.secret:
        return text
    return text.replace(credential.secret, "[secret]")
