"""Hundreds of cards whose `signatures` are junk (wrong types anywhere in the signature
objects, protected headers that are not JSON objects, `kid`s and `jku`s that are not strings,
bytes changed in a real signature, more signatures than the hub checks), registered with
`a2a register` against a real JWKS on 127.0.0.1: each card is registered or refused with a
precise error, never a traceback, and nothing is logged with one.

Seeded (`junk.py`), so a failure reproduces; a summary of the outcomes is printed.
"""

from __future__ import annotations

import json
import logging
import random
import traceback
from collections import Counter

import pytest
from django.core.management.base import CommandError

from tests.a2a_core.cli.helpers import a2a
from tests.a2a_core.cli.test_register_signed_card import signed_card
from tests.identity import IdentityProvider
from tests.reliability.junk import junk_signatures

pytestmark = pytest.mark.django_db

SEED = 20261123
CARDS = 300


def test_cards_with_junk_signatures_are_registered_or_refused_never_with_a_traceback(
    settings, tmp_path, caplog
):
    caplog.set_level(logging.WARNING)
    rng = random.Random(SEED)
    signer = IdentityProvider()
    try:
        real = signed_card(signer, "fz")["signatures"][0]
        outcomes: Counter[str] = Counter()
        crashes: list[str] = []
        path = tmp_path / "card.json"
        for i in range(CARDS):
            trust = rng.choice(["pinned", "follow jku", "nobody"])
            settings.HUB_CARD_SIGNER_JWKS = [signer.jwks_url] if trust == "pinned" else []
            settings.HUB_CARD_SIGNER_FOLLOW_JKU = trust == "follow jku"
            settings.HUB_CARD_ALLOW_UNVERIFIED = rng.random() < 0.3
            card = signed_card(signer, f"fz-{i}")
            if rng.random() < 0.25:  # an A2A 0.3 card
                interface = card.pop("supportedInterfaces")[0]
                card.update(url=interface["url"], protocolVersion="0.3.0")
            card["signatures"] = junk_signatures(rng, real, signer.keys[0].kid, signer.jwks_url)
            path.write_text(json.dumps(card))
            try:
                a2a("register", str(path))
            except CommandError as exc:
                first = str(exc).splitlines()[0]
                outcomes[f"refused: {first.split(' (')[0].split(':')[0]}"] += 1
            except Exception:
                crashes.append(f"card {i} ({trust}): {traceback.format_exc()}")
            else:
                outcomes["registered"] += 1
    finally:
        signer.stop()

    print(f"\n{CARDS} cards with junk signatures:")
    for outcome, count in outcomes.most_common():
        print(f"  {count:4d}  {outcome}")
    assert crashes == [], crashes[0]
    assert [
        r.getMessage() for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR
    ] == []
    # Much of the junk got past the card's schema to the signature check itself.
    checked = sum(count for outcome, count in outcomes.items() if "signature" in outcome)
    assert checked > CARDS / 3, outcomes
