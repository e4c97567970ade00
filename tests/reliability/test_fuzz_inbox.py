"""Junk at the escalation inbox's entry points: its page's query (paging, view, filters), an
escalation's page, "select all matching" and the line's approve. Each gets a page or the
form's own notice, never a 500 or a logged error."""

from __future__ import annotations

import logging
import random
from typing import Any
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import User
from django.test import Client

from a2a_core.models import Escalation
from a2a_core.services.users import user_create
from tests.factories import held_escalation
from tests.reliability.junk import HUGE_INTS, junk_value, query_text

pytestmark = pytest.mark.django_db

SEED = 42
REQUESTS = 250
PARAMS = ["after", "before", "last", "view", "sort", "group", "agent", "pair", "q", "state"]


def junk(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.3:
        return str(rng.choice([*HUGE_INTS, -1, 0, 10**30]))
    if roll < 0.4:
        return "9" * rng.choice([11, 12, 40, 5000])
    return query_text(junk_value(rng))


def request(client: Client, rng: random.Random, pks: list[int]) -> tuple[str, Any]:
    kind = rng.randrange(5)
    if kind <= 1:
        query = urlencode({rng.choice(PARAMS): junk(rng) for _ in range(rng.randrange(1, 5))})
        url = f"/escalations/?{query}"
        return url, client.get(url, HTTP_HX_REQUEST=rng.choice(["true", ""]))
    if kind == 2:
        pk = rng.choice([*pks, *(abs(v) for v in HUGE_INTS if isinstance(v, int)), 0])
        url = f"/escalations/{pk}/"
        return url, client.get(url)
    if kind == 3:
        data = {
            "scope": rng.choice(["matching", junk(rng)]),
            "match": rng.choice([junk(rng), urlencode({rng.choice(PARAMS): junk(rng)})]),
            "upto": junk(rng),
            "action": rng.choice(["approve", "reject", "redirect", junk(rng)]),
            "reason": junk(rng),
            "to": junk(rng),
            "ids": [junk(rng) for _ in range(rng.randrange(0, 3))],
        }
        url = "/escalations/bulk/"
        return url, client.post(url, data, HTTP_HX_REQUEST="true")
    pk = rng.choice(pks)
    url = f"/escalations/{pk}/approve/"
    return url, client.post(url, {"line": junk(rng)}, HTTP_HX_REQUEST="true")


@pytest.fixture
def operator() -> User:
    return user_create(username="fuzzer", password="a-long-test-password-2026", role="operator")


def test_junk_at_the_inbox_gets_a_page_or_a_notice_never_a_500(operator, caplog):
    caplog.set_level(logging.ERROR)
    pks = [held_escalation(f"m{i}", caller=f"c{i % 3}").pk for i in range(130)]
    client = Client()
    client.force_login(operator)
    rng = random.Random(SEED)
    fives = []
    for _ in range(REQUESTS):
        url, response = request(client, rng, pks)
        if response.status_code >= 500:
            fives.append(f"{response.status_code} {url[:200]}")
    assert fives == [], fives[:5]
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [], errors[:5]
    # Still serving: the inbox lists what is left.
    assert client.get("/escalations/").status_code == 200
    assert Escalation.objects.count() == 130
