"""Other parties' JSON Web Key Sets (identity providers, card signers), fetched and cached.

`asigning_key(url, kid)` (async, for JWT sign-in) and `signing_key(url, kid)` (blocking, for
card signatures at registration) return the key `kid` of the set at `url`, or raise
`KeyNotFound` (the set lacks it) or `JwksUnavailable` (the set cannot be had; the message says
which URL and why). Both share one cache and one fetch per URL:

- single-flight: a URL is fetched by one request at a time; callers that arrive meanwhile wait
  for its outcome instead of fetching too;
- bounded: a fetch has HUB_JWKS_TIMEOUT seconds in all (connecting, at most MAX_REDIRECTS
  redirects, a body of at most MAX_JWKS_BYTES), not per socket read;
- cached: a set is used for HUB_JWKS_CACHE_SECONDS; a `kid` it lacks fetches it again at once,
  at most every HUB_JWKS_REFRESH_COOLDOWN seconds (a provider's key rotation is picked up
  without waiting, made-up `kid`s cannot make the hub hammer it); a failed fetch is remembered
  for HUB_JWKS_FAILURE_CACHE_SECONDS, its callers answered with its reason at once;
- on no shared thread: fetches are coroutines (httpx) of an event loop on a thread of this
  module's own, so a provider that hangs holds nothing the hub needs elsewhere (not the
  default executor that Django's sync_to_async and `asyncio.to_thread` use, nor the database
  thread) and costs only the callers waiting for its keys. A cached answer is read without
  going there.

What a set may hold: a JSON object with a `keys` list; a member that is not a usable signing
key (another `use`, junk members, an RSA modulus over MAX_RSA_BITS) is skipped; a set with no
usable key is unavailable.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import threading
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
from django.conf import settings
from jwt import PyJWK
from jwt.exceptions import PyJWTError

from a2a_core.logging import get_logger, warn_limited

log = get_logger("jwks")

MAX_JWKS_BYTES = 256 * 1024
MAX_REDIRECTS = 3
# Larger RSA keys only make each verification slower; no provider publishes one.
MAX_RSA_BITS = 8192


class JwksUnavailable(Exception):
    """The JWKS could not be fetched or read; the message says which and why."""


class KeyNotFound(Exception):
    """The JWKS holds no signing key with this `kid`."""


@dataclass(frozen=True)
class _Entry:
    """What is known of one URL's set (replaced whole, never changed: read from any thread)."""

    keys: tuple[PyJWK, ...] | None = None  # the last set fetched, its usable signing keys
    fetched_at: float = 0.0
    failure: str | None = None  # why the last fetch failed, unless it succeeded
    failed_at: float = 0.0
    attempted_at: float = 0.0


_entries: dict[str, _Entry] = {}
_generation = 0  # bumped by forget(): a fetch begun before it records nothing


def check_url(url: object) -> None:
    """Refuse what is not an http(s) URL."""
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
        raise JwksUnavailable(f"the JWKS URL {quoted(url)} is not an http(s) URL")


async def asigning_key(url: str, kid: str | None) -> PyJWK:
    """The key `kid` of the JWKS at `url`; None: the set's only key. Waits at most for one
    fetch (HUB_JWKS_TIMEOUT), never on a thread the caller's loop or Django needs."""
    known = _known_or_looked_up(url, kid)
    if isinstance(known, PyJWK):
        return known
    try:
        async with asyncio.timeout(_patience()):
            return await asyncio.wrap_future(known)
    except TimeoutError:
        raise JwksUnavailable(_late(url)) from None


def signing_key(url: str, kid: str | None) -> PyJWK:
    """`asigning_key` for a caller that may block (card signatures at registration; never on
    an event loop's thread)."""
    known = _known_or_looked_up(url, kid)
    if isinstance(known, PyJWK):
        return known
    try:
        return known.result(timeout=_patience())
    except concurrent.futures.TimeoutError:
        known.cancel()
        raise JwksUnavailable(_late(url)) from None


def _known_or_looked_up(url: str, kid: str | None) -> PyJWK | concurrent.futures.Future[PyJWK]:
    """The key when what is cached answers (or the exception it answers with); otherwise the
    lookup, started on the fetching loop."""
    check_url(url)
    key = _decide(_entries.get(url), kid, url, time.monotonic(), may_fetch=True)
    return key if key is not None else _submit(_lookup(url, kid))


def forget() -> None:
    """Drop every cached set and failure (tests; a changed setting)."""
    global _generation
    _generation += 1
    _entries.clear()


def _decide(
    entry: _Entry | None, kid: object, url: str, now: float, *, may_fetch: bool
) -> PyJWK | None:
    """The key, or the exception saying why not, from what is known of the set; None when
    only a fetch can tell. `may_fetch` False: a fetch has just been made for this caller, so
    answer from it (never None)."""
    if entry is None:
        if may_fetch:
            return None
        raise JwksUnavailable(f"the JWKS at {url} was not fetched")
    # Just fetched (may_fetch False), the set is fresh whatever its lifespan; a set kept from
    # before a failed fetch, only within its lifespan.
    fresh = entry.keys is not None and (
        (not may_fetch and entry.failure is None)
        or now - entry.fetched_at < settings.HUB_JWKS_CACHE_SECONDS
    )
    failing = entry.failure is not None and (
        not may_fetch or now - entry.failed_at < settings.HUB_JWKS_FAILURE_CACHE_SECONDS
    )
    if fresh and entry.keys is not None:
        key = _find(entry.keys, kid, url)
        if key is not None:
            return key
        cooled = now - entry.attempted_at >= settings.HUB_JWKS_REFRESH_COOLDOWN
        if may_fetch and cooled and not failing:
            return None  # perhaps a key the provider has just rotated in
        if not failing:
            raise KeyNotFound(f"the JWKS at {url} has no key with kid {quoted(kid)}")
    if failing and entry.failure is not None:
        raise JwksUnavailable(entry.failure)
    if may_fetch:
        return None
    raise JwksUnavailable(f"the JWKS at {url} was not fetched")


def _find(keys: tuple[PyJWK, ...], kid: object, url: str) -> PyJWK | None:
    if kid is None:
        if len(keys) != 1:
            raise KeyNotFound(f"the JWKS at {url} holds {len(keys)} keys and no kid was given")
        return keys[0]
    return next((key for key in keys if key.key_id == kid), None)


# The fetching thread and its loop (started on first use; again in a forked child).
_thread_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_loop_pid = 0
_inflight: dict[str, asyncio.Future[None]] = {}  # touched on the fetching loop only
_client: httpx.AsyncClient | None = None


def _submit[T](coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
    global _loop, _loop_pid
    with _thread_lock:
        if _loop is None or _loop_pid != os.getpid():
            _loop, _loop_pid = asyncio.new_event_loop(), os.getpid()
            _inflight.clear()
            threading.Thread(target=_loop.run_forever, name="jwks", daemon=True).start()
        loop = _loop
    return asyncio.run_coroutine_threadsafe(coroutine, loop)


def _patience() -> float:
    # The fetch ends itself at HUB_JWKS_TIMEOUT; this only guards against a fetch that never
    # got to start.
    return float(settings.HUB_JWKS_TIMEOUT) + 2.0


def _late(url: str) -> str:
    return f"the JWKS at {url} did not answer within {settings.HUB_JWKS_TIMEOUT:g} s"


async def _lookup(url: str, kid: str | None) -> PyJWK:
    """On the fetching loop: the key, after the one fetch of `url` under way or a new one."""
    key = _decide(_entries.get(url), kid, url, time.monotonic(), may_fetch=True)
    if key is not None:
        return key
    fetch = _inflight.get(url)
    if fetch is None:
        fetch = _inflight[url] = asyncio.ensure_future(_refresh(url, _generation))
        fetch.add_done_callback(lambda _: _inflight.pop(url, None))
    # Shielded: a caller that gives up (its client went away) leaves the fetch to the rest.
    await asyncio.shield(fetch)
    key = _decide(_entries.get(url), kid, url, time.monotonic(), may_fetch=False)
    assert key is not None
    return key


async def _refresh(url: str, generation: int) -> None:
    """Fetch the set at `url` and record what came of it (never raises)."""
    started = time.monotonic()
    previous = _entries.get(url) or _Entry()
    failure: str | None = None
    try:
        keys = _parse(url, await _fetch(url))
    except JwksUnavailable as exc:
        failure = str(exc)
        warn_limited(log, f"jwks {url}", failure, jwks_url=url)
    except Exception as exc:  # a fault of the hub's: its callers still get a 503, not a 500
        failure = f"the JWKS at {url} could not be fetched: {type(exc).__name__}"
        log.exception("fetching a JWKS failed", extra={"jwks_url": url})
    if failure is None:
        entry = _Entry(keys=keys, fetched_at=time.monotonic(), attempted_at=started)
    else:
        entry = _Entry(
            keys=previous.keys,
            fetched_at=previous.fetched_at,
            failure=failure,
            failed_at=time.monotonic(),
            attempted_at=started,
        )
    if generation == _generation:
        _entries[url] = entry


async def _fetch(url: str) -> bytes:
    global _client
    if _client is None:
        _client = httpx.AsyncClient(follow_redirects=True, max_redirects=MAX_REDIRECTS)
    deadline = float(settings.HUB_JWKS_TIMEOUT)
    # Identity encoding asked for: a compressed body would be counted only once inflated.
    headers = {"Accept": "application/json", "Accept-Encoding": "identity"}
    try:
        async with asyncio.timeout(deadline):
            request = _client.build_request("GET", url, headers=headers, timeout=deadline)
            response = await _client.send(request, stream=True)
            try:
                if response.status_code != 200:
                    raise JwksUnavailable(
                        f"the JWKS at {url} answered HTTP {response.status_code}, not the key set"
                    )
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_JWKS_BYTES:
                        raise JwksUnavailable(
                            f"the JWKS at {url} is larger than {MAX_JWKS_BYTES:,} bytes"
                        )
            finally:
                await response.aclose()
    except TimeoutError:
        raise JwksUnavailable(_late(url) + " (HUB_JWKS_TIMEOUT)") from None
    except httpx.TooManyRedirects:
        raise JwksUnavailable(
            f"the JWKS at {url} redirects more than {MAX_REDIRECTS} times"
        ) from None
    # httpx raises InvalidURL (and ValueError from the standard library's IDNA codec) for an
    # address it cannot send to; both are what was configured, not a fault of the hub.
    except (httpx.HTTPError, httpx.InvalidURL, ValueError) as exc:
        said = str(exc) or type(exc).__name__
        raise JwksUnavailable(f"the JWKS at {url} is unreachable: {said}") from None
    if response.headers.get("content-type", "").startswith("text/html"):
        raise JwksUnavailable(f"the JWKS at {url} answered an HTML page, not a JSON key set")
    return bytes(body)


def _parse(url: str, body: bytes) -> tuple[PyJWK, ...]:
    """The usable signing keys of a JWKS document."""
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        raise JwksUnavailable(f"the JWKS at {url} is not JSON") from None
    members = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(members, list):
        raise JwksUnavailable(f"the JWKS at {url} is not a key set (a JSON object with 'keys')")
    keys = [key for member in members if (key := _signing_key(member)) is not None]
    if not keys:
        raise JwksUnavailable(
            f"the JWKS at {url} holds no usable signing key ({len(members)} member(s))"
        )
    return tuple(keys)


def _signing_key(member: object) -> PyJWK | None:
    if not isinstance(member, dict) or member.get("use", "sig") != "sig":
        return None
    modulus = member.get("n")
    if isinstance(modulus, str) and len(modulus) * 6 > MAX_RSA_BITS + 8:
        return None
    try:
        key = PyJWK(member)
    # PyJWK raises its own errors for what it expects to go wrong, and builtin ones for
    # members of unexpected types (an unhashable `alg`, a `kty` whose fields are missing).
    except (PyJWTError, KeyError, TypeError, ValueError, AttributeError):
        return None
    return key if key.key_id is None or isinstance(key.key_id, str) else None


def quoted(value: object) -> str:
    """A value from a token or a set, short enough for a message."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
