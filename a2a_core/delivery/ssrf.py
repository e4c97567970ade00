"""Which addresses the hub may POST to on an agent's or an admin's behalf.

A push webhook URL comes from an agent, so it could point the hub at its own network (a
database, a cloud metadata service at 169.254.169.254, localhost). Only public unicast
addresses are allowed, unless the host name or the address is listed in
HUB_PUSH_ALLOWED_HOSTS. Notification targets (set by admins) are checked the same way against
their own list, HUB_NOTIFY_ALLOWED_HOSTS: an internal Slack proxy is listed there, and a
stolen admin session cannot aim the hub at whatever else listens inside.

The check that counts runs before every POST (`resolve`): the host is resolved once, every
address it resolves to is checked, and the POST connects to one of those addresses, so a DNS
answer cannot change between the check and the connection. When a config or a target is
created, the same check runs on the same resolver (`check_new`, `check_new_blocking`), so
every spelling of an address the resolver reads (`127.1`, `0x7f000001`, `2130706433`,
`0177.0.0.1`, `[::ffff:127.0.0.1]`, `localhost.`, `LOCALHOST`, an IDN that maps to one of
these) is refused there with the reason a POST would give, and so is a URL the HTTP client
cannot send to. A host that does not resolve yet, or not within the wait, passes there: it is
resolved again before each POST, since DNS can change.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import threading
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from functools import lru_cache
from urllib.parse import urlsplit

import httpx
from django.conf import settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class UnsafeTarget(Exception):
    """The URL's host is not one the hub may POST to; the message says why."""


class DoesNotResolve(UnsafeTarget):
    """The URL's host does not resolve (or not within the wait): refused when posting, let
    through when a config is created (it may resolve by the time anything is sent)."""


def _entries(value: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else value
    return tuple(item.strip() for item in items if item.strip())


@lru_cache(maxsize=8)
def _allow_list(entries: tuple[str, ...]) -> tuple[frozenset[str], tuple[IPNetwork, ...]]:
    names: set[str] = set()
    networks: list[IPNetwork] = []
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
        except ValueError:
            names.add(entry.lower().rstrip("."))
    return frozenset(names), tuple(networks)


PUSH = "HUB_PUSH_ALLOWED_HOSTS"
NOTIFY = "HUB_NOTIFY_ALLOWED_HOSTS"


def allowed(setting: str = PUSH) -> tuple[frozenset[str], tuple[IPNetwork, ...]]:
    """The allow-list `setting` (PUSH or NOTIFY) as (host names, networks)."""
    return _allow_list(_entries(getattr(settings, setting)))


def non_public(address: IPAddress) -> str | None:
    """Why `address` is not a public unicast address (None when it is)."""
    mapped = getattr(address, "ipv4_mapped", None)
    if mapped is not None:
        address = mapped
    checks = (
        ("unspecified", address.is_unspecified),
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("reserved", address.is_reserved),
        ("private", address.is_private),
        ("non-public", not address.is_global),
    )
    return next((name for name, hit in checks if hit), None)


def _check_address(
    host: str, text: str, networks: tuple[IPNetwork, ...], setting: str = PUSH
) -> None:
    address = ipaddress.ip_address(text.split("%", 1)[0])
    reason = non_public(address)
    forms = {address, getattr(address, "ipv4_mapped", None) or address}
    if reason and not any(form in network for form in forms for network in networks):
        shown = host if host == text else f"{host} resolves to {text}, which"
        raise UnsafeTarget(
            f"{shown} is a {reason} address; the hub only POSTs to public addresses "
            f"(an operator can allow it with {setting})"
        )


def _host(url: str) -> str:
    host = (urlsplit(url).hostname or "").rstrip(".")
    if not host:
        raise UnsafeTarget(f"{url} has no host")
    return host


def _port(url: str) -> int:
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        raise UnsafeTarget("the URL's port is not a number from 0 to 65535") from None
    return port or (443 if parts.scheme == "https" else 80)


def _checked(host: str, addresses: list[str], setting: str) -> list[str]:
    """`addresses` when each is allowed by the allow-list `setting`; else `UnsafeTarget`
    naming the first that is not."""
    if not addresses:
        raise DoesNotResolve(f"webhook host {host} does not resolve")
    names, networks = allowed(setting)
    if host.lower() not in names:
        for text in addresses:
            _check_address(host, text, networks, setting)
    return addresses


async def resolve(url: str, *, wait_seconds: float, setting: str = PUSH) -> list[str]:
    """The addresses `url`'s host resolves to now, all of them allowed by the allow-list
    `setting`; raise `UnsafeTarget` naming the first that is not, or `DoesNotResolve` saying
    that the host does not resolve now."""
    host = _host(url)
    try:
        async with asyncio.timeout(wait_seconds):
            infos = await asyncio.get_running_loop().getaddrinfo(
                host, _port(url), type=socket.SOCK_STREAM
            )
    except TimeoutError:
        raise DoesNotResolve(
            f"webhook host {host} did not resolve within {wait_seconds:g}s"
        ) from None
    except UnicodeError:  # an IDNA label too long or empty: no resolver will ever look it up
        raise UnsafeTarget(f"webhook host {host} is not a valid host name") from None
    except OSError:
        raise DoesNotResolve(f"webhook host {host} does not resolve") from None
    return _checked(host, list(dict.fromkeys(str(info[4][0]) for info in infos)), setting)


def _sendable(url: str) -> None:
    """Refuse a URL the HTTP client the hub POSTs with cannot send to (it reads fewer
    spellings than the resolver: `0177.0.0.1`, a full-width IDN)."""
    try:
        httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise UnsafeTarget(f"the hub cannot send to this URL: {exc}") from None


async def check_new(url: str, *, wait_seconds: float, setting: str = PUSH) -> None:
    """For a webhook being created: raise `UnsafeTarget` when a POST made now would be
    refused (`resolve`), or the URL cannot be sent to at all. A host that does not resolve,
    or not within `wait_seconds`, passes: it is resolved again before each POST."""
    with contextlib.suppress(DoesNotResolve):
        await resolve(url, wait_seconds=wait_seconds, setting=setting)
    _sendable(url)


def check_new_blocking(url: str, *, wait_seconds: float, setting: str = PUSH) -> None:
    """`check_new` from sync code (an admin adding a notification target): the lookup runs on
    a thread of its own, and this waits for it at most `wait_seconds`, then lets the host
    through like one that did not resolve."""
    done: Future[None] = Future()

    def run() -> None:
        try:
            asyncio.run(check_new(url, wait_seconds=wait_seconds, setting=setting))
        except BaseException as exc:  # handed to the waiting caller
            done.set_exception(exc)
        else:
            done.set_result(None)

    threading.Thread(target=run, name="webhook-check", daemon=True).start()
    try:
        done.result(timeout=wait_seconds + 1)
    except FutureTimeout:
        _sendable(url)
