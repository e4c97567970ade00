"""The receiver's side: signing, verifying and refusing replays, without a hub."""

from __future__ import annotations

import ipaddress

import pytest

from a2a_core.client.webhooks import InvalidSignature, ReplayGuard, sign, verify
from a2a_core.delivery.ssrf import non_public

BODY = b'{"statusUpdate":{"taskId":"t-1"}}'
KEY = "receiver-signing-key-0123456789"


def test_a_signature_is_an_hmac_of_the_timestamp_and_body():
    header = sign(BODY, KEY, timestamp=1_700_000_000)

    assert header.startswith("t=1700000000,v1=")
    verify(BODY, header, KEY, now=1_700_000_100)


@pytest.mark.parametrize(
    "header",
    ["", "v1=abc", "t=1700000000", "t=soon,v1=abc", "t=1700000000;v1=abc", "garbage"],
)
def test_a_malformed_header_is_refused(header):
    with pytest.raises(InvalidSignature, match="malformed"):
        verify(BODY, header, KEY, now=1_700_000_000)


def test_a_signature_from_the_future_or_past_is_refused_outside_the_tolerance():
    header = sign(BODY, KEY, timestamp=1_700_000_000)

    verify(BODY, header, KEY, now=1_700_000_000 - 60, tolerance_seconds=60)
    for now in (1_700_000_000 - 61, 1_700_000_000 + 61):
        with pytest.raises(InvalidSignature, match="away from now"):
            verify(BODY, header, KEY, now=now, tolerance_seconds=60)


def test_a_replay_guard_accepts_each_signature_once_and_forgets_old_ones():
    guard = ReplayGuard(tolerance_seconds=60)
    header = sign(BODY, KEY, timestamp=1_000)
    verify(BODY, header, KEY, now=1_000, tolerance_seconds=60, seen=guard)

    with pytest.raises(InvalidSignature, match="replayed"):
        verify(BODY, header, KEY, now=1_030, tolerance_seconds=60, seen=guard)
    # Once outside the tolerance the signature is refused for its age, so the guard can
    # forget it.
    verify(BODY, sign(BODY, KEY, timestamp=1_100), KEY, now=1_100, tolerance_seconds=60, seen=guard)
    assert len(guard) == 1


def test_a_replay_guard_is_bounded():
    guard = ReplayGuard(max_entries=3)

    for t in range(10):
        verify(BODY, sign(BODY, KEY, timestamp=1_000 + t), KEY, now=1_000, seen=guard)

    assert len(guard) == 3


def test_a_bad_signature_is_not_remembered_by_the_guard():
    guard = ReplayGuard()
    header = sign(BODY, KEY, timestamp=1_000)

    with pytest.raises(InvalidSignature, match="does not match"):
        verify(BODY + b" ", header, KEY, now=1_000, seen=guard)
    verify(BODY, header, KEY, now=1_000, seen=guard)


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("8.8.8.8", None),
        ("2001:4860:4860::8888", None),
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("10.0.0.1", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("fc00::1", "private"),
        ("100.64.0.1", "non-public"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:10.0.0.1", "private"),
    ],
)
def test_only_public_unicast_addresses_are_webhook_targets(address, reason):
    assert non_public(ipaddress.ip_address(address)) == reason
