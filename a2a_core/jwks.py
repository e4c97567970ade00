"""Other parties' JSON Web Key Sets (identity providers, card signers), fetched and cached.

One `PyJWKClient` per URL keeps the set for HUB_JWKS_CACHE_SECONDS; a `kid` it does not hold
fetches the set again at once (at most every HUB_JWKS_REFRESH_COOLDOWN seconds), so a
provider's key rotation is picked up without waiting. Fetching blocks for up to
HUB_JWKS_TIMEOUT seconds: call these from a worker thread, never on the event loop.
"""

from __future__ import annotations

import threading
from urllib.parse import urlsplit

from django.conf import settings
from jwt import PyJWK, PyJWKClient
from jwt.exceptions import PyJWKClientConnectionError, PyJWKClientError, PyJWKSetError

_lock = threading.Lock()
_clients: dict[tuple[str, float, float, float], PyJWKClient] = {}


class JwksUnavailable(Exception):
    """The JWKS could not be fetched or read; the message says which and why."""


class KeyNotFound(Exception):
    """The JWKS holds no signing key with this `kid`."""


def _client(url: str) -> PyJWKClient:
    key = (
        url,
        settings.HUB_JWKS_TIMEOUT,
        float(settings.HUB_JWKS_CACHE_SECONDS),
        settings.HUB_JWKS_REFRESH_COOLDOWN,
    )
    with _lock:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = PyJWKClient(
                url,
                lifespan=key[2],
                timeout=key[1],
                cooldown_duration=key[3],
            )
        return client


def check_url(url: str) -> None:
    """Refuse what is not an http(s) URL (urllib would open file: URLs too)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise JwksUnavailable(f"the JWKS URL {url!r} is not an http(s) URL")


def signing_key(url: str, kid: str | None) -> PyJWK:
    """The key `kid` of the JWKS at `url` (blocking; see the module docstring)."""
    check_url(url)
    client = _client(url)
    try:
        if kid is None:
            keys = client.get_signing_keys()
            if len(keys) != 1:
                raise KeyNotFound(f"the JWKS at {url} holds {len(keys)} keys and no kid was given")
            return keys[0]
        return client.get_signing_key(kid)
    except PyJWKClientConnectionError as exc:
        raise JwksUnavailable(f"the JWKS at {url} is unreachable: {exc}") from None
    except PyJWKSetError as exc:
        raise JwksUnavailable(f"the JWKS at {url} is not a usable key set: {exc}") from None
    except PyJWKClientError as exc:
        if "Unable to find a signing key" in str(exc):
            raise KeyNotFound(f"the JWKS at {url} has no key with kid {kid!r}") from None
        raise JwksUnavailable(f"the JWKS at {url} is not a usable key set: {exc}") from None


def forget() -> None:
    """Drop every cached set (tests; a changed setting)."""
    with _lock:
        _clients.clear()
