"""Which pages may open the dashboard's websocket: exactly the origins Django's CSRF check
lets post the dashboard's forms.

A browser sends the page's origin (scheme, host and port) with the websocket handshake. It is
accepted when it is the origin the hub itself is reached at — the handshake's `Host`, which
must be one of ALLOWED_HOSTS, with `http` or `https` as the connection is secure (behind a
proxy, by SECURE_PROXY_SSL_HEADER) — or one of CSRF_TRUSTED_ORIGINS. A page on another port of
the same host is another origin, and refused.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host
from django.utils.http import is_same_domain


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return str(value.decode("latin-1"))
    return None


def _allowed_hosts() -> list[str]:
    # Django's own fallback when DEBUG is on and ALLOWED_HOSTS is empty.
    if settings.DEBUG and not settings.ALLOWED_HOSTS:
        return [".localhost", "127.0.0.1", "[::1]"]
    return list(settings.ALLOWED_HOSTS)


def _is_secure(scope: dict[str, Any]) -> bool:
    if scope.get("scheme") in ("wss", "https"):
        return True
    proxy_header = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy_header:
        name, secure_value = proxy_header
        header = name.removeprefix("HTTP_").lower().replace("_", "-").encode()
        value = _header(scope, header)
        return value is not None and value.split(",", 1)[0].strip() == secure_value
    return False


def own_origin(scope: dict[str, Any]) -> str | None:
    """The origin the hub is reached at by this handshake; None when its Host is not one of
    ALLOWED_HOSTS."""
    host = _header(scope, b"host")
    if not host:
        return None
    domain, _ = split_domain_port(host)
    if not domain or not validate_host(domain, _allowed_hosts()):
        return None
    return f"{'https' if _is_secure(scope) else 'http'}://{host.lower()}"


def origin_allowed(origin: str, scope: dict[str, Any]) -> bool:
    """Whether a page at `origin` may open the websocket this handshake asks for."""
    origin = origin.lower()
    if origin == own_origin(scope):
        return True
    trusted = [o.lower() for o in settings.CSRF_TRUSTED_ORIGINS]
    if origin in (o for o in trusted if "*" not in o):
        return True
    parts = urlsplit(origin)
    for pattern in (o for o in trusted if "*" in o):
        scheme, _, netloc = pattern.partition("://")
        if parts.scheme == scheme and is_same_domain(parts.netloc, netloc.lstrip("*")):
            return True
    return False


class SameOriginValidator:
    """ASGI middleware: refuse the websocket handshake (HTTP 403) unless its Origin header
    names an origin `origin_allowed` accepts."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: Any, receive: Any, send: Any) -> Any:
        origin = _header(scope, b"origin")
        if origin is not None and origin_allowed(origin, scope):
            return await self.application(scope, receive, send)
        return await WebsocketDenier()(scope, receive, send)
