"""Which addresses the hub may POST to on an agent's or an admin's behalf.

A push webhook URL comes from an agent, so it could point the hub at its own network (a
database, a cloud metadata service at 169.254.169.254, localhost). Only public unicast
addresses are allowed, unless the host name or the address is listed in
HUB_PUSH_ALLOWED_HOSTS. Notification targets (set by admins) are checked the same way against
their own list, HUB_NOTIFY_ALLOWED_HOSTS: an internal Slack proxy is listed there, and a
stolen admin session cannot aim the hub at whatever else listens inside.

The check that counts runs before every POST (`resolve`): the host is resolved once, every
address it resolves to is checked, and the POST connects to one of those addresses, so a DNS
answer cannot change between the check and the connection. When a config is created only a
host written as an address is checked (`check_literal`): a name is not resolved then, since
it may not resolve yet, or resolve elsewhere by the time anything is sent.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from functools import lru_cache
from urllib.parse import urlsplit

from django.conf import settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class UnsafeTarget(Exception):
    """The URL's host is not one the hub may POST to; the message says why."""


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


def check_literal(url: str) -> None:
    """Raise `UnsafeTarget` when `url`'s host is written as an address the hub may not POST
    to. A host name passes without being resolved (`resolve` checks it before each POST)."""
    host = _host(url)
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return
    names, networks = allowed()
    if host.lower() not in names:
        _check_address(host, host, networks)


async def resolve(url: str, *, wait_seconds: float, setting: str = PUSH) -> list[str]:
    """The addresses `url`'s host resolves to now, all of them allowed by the allow-list
    `setting`; raise `UnsafeTarget` naming the first that is not, or saying that the host does
    not resolve."""
    host = _host(url)
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        async with asyncio.timeout(wait_seconds):
            infos = await asyncio.get_running_loop().getaddrinfo(
                host, port, type=socket.SOCK_STREAM
            )
    except TimeoutError:
        raise UnsafeTarget(
            f"webhook host {host} did not resolve within {wait_seconds:g}s"
        ) from None
    except OSError:
        raise UnsafeTarget(f"webhook host {host} does not resolve") from None
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not addresses:
        raise UnsafeTarget(f"webhook host {host} does not resolve")
    names, networks = allowed(setting)
    if host.lower() not in names:
        for text in addresses:
            _check_address(host, text, networks, setting)
    return addresses
