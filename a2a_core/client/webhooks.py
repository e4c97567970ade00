"""Checking the hub's push notifications on the receiving side.

When a push notification config was created with a token, every POST the hub makes to its
webhook carries the token as the A2A spec says, and a signature of the body keyed by it:

    X-A2A-Notification-Token: <token>
    X-A2A-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of f"{t}." + body, keyed by the token>

The token says the POST is for this config; the signature also ties the body to the token and
a time, so a changed body, an old one, or (with a `ReplayGuard`) one sent twice is refused.
Without a token neither header is sent. A receiver checks the signature before trusting the
body:

    from a2a_core.client.webhooks import InvalidSignature, ReplayGuard, verify

    guard = ReplayGuard()
    try:
        verify(body, request.headers["X-A2A-Signature"], token, seen=guard)
    except InvalidSignature as exc:
        return 401, exc.reason

Only the standard library is used, so an agent can copy this module as it is.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
import time
from collections import OrderedDict

HEADER = "X-A2A-Signature"
TOKEN_HEADER = "X-A2A-Notification-Token"
DEFAULT_TOLERANCE_SECONDS = 300


class InvalidSignature(Exception):
    """The signature does not prove the body came from the hub, now; `reason` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _digest(body: bytes, token: str, timestamp: int) -> str:
    return hmac.new(token.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def sign(body: bytes, token: str, *, timestamp: int | None = None) -> str:
    """The X-A2A-Signature header value for `body` (signed now unless `timestamp` is given)."""
    t = int(time.time()) if timestamp is None else timestamp
    return f"t={t},v1={_digest(body, token, t)}"


class ReplayGuard:
    """Remembers the signatures seen in the last `tolerance_seconds`, so one request cannot be
    accepted twice. Bounded: past `max_entries` the oldest are forgotten first. Thread-safe.
    Use one guard per receiver process with the same tolerance as `verify`."""

    def __init__(
        self,
        *,
        tolerance_seconds: int = DEFAULT_TOLERANCE_SECONDS,
        max_entries: int = 100_000,
    ) -> None:
        self.tolerance_seconds = tolerance_seconds
        self.max_entries = max_entries
        self._seen: OrderedDict[tuple[int, str], None] = OrderedDict()
        self._lock = threading.Lock()

    def check_and_remember(self, timestamp: int, signature: str, *, now: float) -> bool:
        """True (and remembered) the first time a (timestamp, signature) pair is seen."""
        key = (timestamp, signature)
        with self._lock:
            self._forget_before(now - self.tolerance_seconds)
            if key in self._seen:
                return False
            self._seen[key] = None
            while len(self._seen) > self.max_entries:
                self._seen.popitem(last=False)
            return True

    def _forget_before(self, oldest: float) -> None:
        # Entries arrive roughly in timestamp order; stop at the first one still fresh.
        while self._seen:
            timestamp, _ = next(iter(self._seen))
            if timestamp >= oldest:
                return
            self._seen.popitem(last=False)

    def __len__(self) -> int:
        return len(self._seen)


def _parse(header: str) -> tuple[int, list[str]]:
    timestamp: int | None = None
    signatures: list[str] = []
    for item in header.split(","):
        key, sep, value = item.strip().partition("=")
        if not sep:
            raise InvalidSignature(f"malformed {HEADER} header: expected t=...,v1=...")
        if key == "t":
            if not value.isdigit() or timestamp is not None:
                raise InvalidSignature(f"malformed {HEADER} header: bad timestamp")
            timestamp = int(value)
        elif key == "v1":
            signatures.append(value)
    if timestamp is None or not signatures:
        raise InvalidSignature(f"malformed {HEADER} header: expected t=...,v1=...")
    return timestamp, signatures


def verify(
    body: bytes,
    header: str,
    token: str,
    *,
    tolerance_seconds: int = DEFAULT_TOLERANCE_SECONDS,
    now: float | None = None,
    seen: ReplayGuard | None = None,
) -> None:
    """Return if `header` is a valid signature of `body` with `token`, made within
    `tolerance_seconds` of `now` and (with `seen`) not accepted before. Otherwise raise
    `InvalidSignature`. Compares in constant time."""
    timestamp, signatures = _parse(header or "")
    moment = time.time() if now is None else now
    if abs(moment - timestamp) > tolerance_seconds:
        raise InvalidSignature(
            f"timestamp {timestamp} is more than {tolerance_seconds}s away from now"
        )
    expected = _digest(body, token, timestamp)
    match = next(
        (s for s in signatures if hmac.compare_digest(s.encode(), expected.encode())), None
    )
    if match is None:
        raise InvalidSignature("signature does not match the body")
    if seen is not None and not seen.check_and_remember(timestamp, match, now=moment):
        raise InvalidSignature("signature already used: a replayed request")
