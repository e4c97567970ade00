"""Junk at the two doors where people decide from a notification: Slack's interactivity
callback (junk, oversized and hostile bodies and headers, signed or not) and an email's
action link (junk, tampered and hostile tokens, as GET and POST). Every answer is a clear
4xx in the door's own form (JSON for Slack, the link's page for email), never a 5xx, and the
item they might have decided stays pending. Seeded, so a failure reproduces."""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from typing import Any
from urllib.parse import quote, urlencode

import httpx
import pytest
from django.core import signing
from django.test import Client

from a2a_core.asyncdb import db
from a2a_core.models import AuditEvent, Escalation
from a2a_core.services.notify_actions import SALT, action_link_token
from a2a_core.services.users import user_create
from tests.a2a_core.notify.conftest import hold, holding
from tests.a2a_core.notify.test_approve_where_told import MAPPED, PASSWORD, SECRET, signed
from tests.reliability.junk import junk_value, surrogate

pytestmark = pytest.mark.live

SEED = 20261129
SLACK_REQUESTS = 800
LINK_REQUESTS = 400


def junk_payload(rng: random.Random, held: int) -> Any:
    """Something shaped like Slack's interaction, or not at all."""
    good: dict[str, Any] = {
        "type": "block_actions",
        "user": {"id": rng.choice([MAPPED, "U0NOBODY", ""])},
        "actions": [{"action_id": "approve", "value": str(held + rng.randrange(1, 10**6))}],
    }
    roll = rng.random()
    if roll < 0.2:
        return junk_value(rng)
    if roll < 0.4:
        good[rng.choice(["type", "user", "actions"])] = junk_value(rng)
        return good
    if roll < 0.6:
        action = {rng.choice(["action_id", "value", "type"]): junk_value(rng)}
        good["actions"] = [action] * rng.randrange(0, 3)
        return good
    if roll < 0.7:
        good["actions"][0]["value"] = rng.choice(
            ["1" * 13, "-1", "0x10", "١٢", "1e3", f"{held}\n", " 1", "99999999999"]
        )
        return good
    return good


def slack_request(rng: random.Random, held: int) -> tuple[bytes, dict[str, str]]:
    """A junk body and headers; about half correctly signed, so the payload checks run."""
    roll = rng.random()
    if roll < 0.1:
        body = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 300)))
    elif roll < 0.15:
        body = b"payload=" + b"%5B" * 3000 + b"%5D" * 3000
    elif roll < 0.2:
        body = b"payload=" + b"x" * rng.choice([70_000, 1_100_000])
    elif roll < 0.3:
        body = urlencode([(rng.choice(["payload", "x", ""]), "1") for _ in range(2)]).encode()
    elif roll < 0.35:
        body = ("payload=" + quote(json.dumps(junk_payload(rng, held)))[:-5]).encode()
    else:
        text = json.dumps(junk_payload(rng, held), ensure_ascii=rng.random() < 0.5)
        body = urlencode({"payload": text}, encoding="utf-8", errors="surrogatepass").encode()
    now = int(time.time())
    headers = signed(body, now)
    choice = rng.random()
    if choice < 0.15:
        headers["X-Slack-Signature"] = rng.choice(["", "v0=", "v1=" + "a" * 64, "v0=" + "z" * 64])
    elif choice < 0.25:
        headers["X-Slack-Request-Timestamp"] = rng.choice(
            ["", "-1", "abc", "1" * 40, str(now - 301), str(now + 10**9), "1e9", "+1"]
        )
    elif choice < 0.35:
        headers = signed(body, now, secret=rng.choice(["", "wrong", SECRET + "x"]))
    elif choice < 0.4:
        headers = {}
    if rng.random() < 0.05:
        headers["Content-Type"] = rng.choice(["application/json", "text/plain", "multipart/x"])
    return body, headers


def link_token(rng: random.Random, olga: int, held: int) -> str:
    """A token that is not a good link of olga's for `held`."""
    roll = rng.random()
    if roll < 0.2:
        return "".join(chr(rng.randrange(0x21, 0x2FFF)) for _ in range(rng.randrange(1, 80)))
    if roll < 0.3:
        return "x" * rng.choice([501, 5000])
    if roll < 0.5:
        payload = junk_value(rng)
        if rng.random() < 0.6:
            payload = {"e": junk_value(rng), "a": junk_value(rng), "u": olga, "n": "abc"}
        try:
            return signing.dumps(payload, salt=SALT)
        except (TypeError, ValueError, UnicodeEncodeError):
            return "junk"
    if roll < 0.6:
        big = rng.choice([2**63, 2**64, -1, 0, 10**30])
        return signing.dumps({"e": big, "a": "approve", "u": olga, "n": "a"}, salt=SALT)
    if roll < 0.7:
        return signing.dumps({"e": held, "a": "approve", "u": olga, "n": "a"}, salt="other")
    if roll < 0.8:
        good = action_link_token(escalation_id=held, action="approve", user_id=olga + 1)
        return good
    good = action_link_token(escalation_id=held, action="approve", user_id=olga)
    cut = rng.randrange(1, len(good))
    other = [c for c in ["A", "-", ":", "", surrogate(rng)] if c != good[cut]]
    return good[:cut] + rng.choice(other) + good[cut + 1 :]  # never the same character


@pytest.fixture
def slack_on(settings, hub) -> Any:
    settings.HUB_DASHBOARD_URL = hub.url
    settings.HUB_SLACK_SIGNING_SECRET = SECRET
    settings.HUB_SLACK_USERS = {MAPPED: "olga"}
    return settings


def users() -> int:
    user_create(username="pete", password=PASSWORD, role="operator")
    return user_create(username="olga", password=PASSWORD, role="operator").pk


async def test_junk_at_the_slack_callback_and_email_links_gets_4xx_and_decides_nothing(
    hub, sdk, slack_on
):
    olga = await db(users)
    alpha = await holding(hub, sdk)
    held = (await hold(alpha, "the one nobody may decide by accident")).pk
    rng = random.Random(SEED)
    statuses: Counter[int] = Counter()
    bad: list[Any] = []
    async with httpx.AsyncClient(base_url=hub.url, timeout=30) as http:
        for _ in range(SLACK_REQUESTS):
            body, headers = slack_request(rng, held)
            if len(body) > 64 * 1024:  # refused by size: a fresh connection (see test_fuzz)
                async with httpx.AsyncClient(base_url=hub.url, timeout=30) as fresh:
                    answer = await fresh.post(
                        "/notify/slack/actions/", content=body, headers=headers
                    )
            else:
                answer = await http.post("/notify/slack/actions/", content=body, headers=headers)
            statuses[answer.status_code] += 1
            if not 400 <= answer.status_code < 500 or "error" not in answer.json():
                bad.append((answer.status_code, body[:200], headers, answer.text[:300]))

    def links() -> None:
        client = Client()
        assert client.login(username="olga", password=PASSWORD)
        for _ in range(LINK_REQUESTS):
            token = link_token(rng, olga, held)
            path = "/notify/act/" + quote(token, safe="", errors="surrogatepass") + "/"
            post = rng.random() < 0.5
            form = urlencode({"reason": str(junk_value(rng))}, errors="surrogatepass")
            kind = "application/x-www-form-urlencoded"
            answer = client.post(path, form, content_type=kind) if post else client.get(path)
            statuses[answer.status_code] += 1
            if not 400 <= answer.status_code < 500:
                bad.append((answer.status_code, token[:200], post))

    await db(links)
    print(f"statuses: {dict(sorted(statuses.items()))}")
    assert bad == []
    assert set(statuses) >= {400, 401, 403, 404, 413}
    item = await db(Escalation.objects.get, pk=held)
    assert (item.status, item.decided_by_name) == ("pending", "")
    assert not await db(AuditEvent.objects.filter(action__startswith="escalation.").exists)
