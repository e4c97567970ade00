"""Content rules under hostile input: junk and hostile rule documents get a precise error
through the CLI and nothing stored; hostile messages through the hub with every detector on
get no 5xx, and the hub keeps serving and stores them masked.

Seeded, so a failure reproduces.
"""

from __future__ import annotations

import json
import random
from typing import Any

import httpx
import pytest
from django.core.management.base import CommandError

from a2a_core.asyncdb import db
from a2a_core.errors import ValidationFailed
from a2a_core.models import Message, PolicyVersion
from a2a_core.schemas.policy import parse_policy
from a2a_core.services.policy import policy_publish
from tests.a2a_core.cli.helpers import a2a
from tests.a2a_core.protocol.helpers import request, send
from tests.reliability.junk import junk_value

SEED = 20261129
FIELDS = [
    "name",
    "detect",
    "pattern",
    "direction",
    "action",
    "reason",
    "callers",
    "targets",
    "kinds",
    "skills",
    "examples",
]
HOSTILE_PATTERNS = [
    "(a+)+$",  # linear in RE2; accepted
    "(?<=a)b",  # lookbehind: not RE2
    "(?P<x>a)(?P=x)",  # backreference: not RE2
    "(",
    "a{1001}",  # over RE2's repetition limit
    "x" * 501,  # over the length limit
    "[",
    "\\",
    "",
    "((a{100}){100}){100}",  # over RE2's program size
]


def rule_of_junk(rng: random.Random) -> dict[str, Any]:
    rule: dict[str, Any] = {"name": "junk", "detect": "pattern", "pattern": "x"}
    for _ in range(rng.randrange(1, 4)):
        rule[rng.choice(FIELDS)] = junk_value(rng)
    return rule


@pytest.mark.django_db
def test_junk_content_rules_are_refused_with_their_path_or_accepted_never_a_crash():
    rng = random.Random(SEED)
    outcomes = {"accepted": 0, "refused": 0}
    for _ in range(2000):
        document = {"contentRules": [rule_of_junk(rng) for _ in range(rng.randrange(1, 3))]}
        try:
            parse_policy(document)
        except ValidationFailed as exc:
            assert exc.problems and all(p.field.startswith("contentRules") for p in exc.problems)
            outcomes["refused"] += 1
        else:
            outcomes["accepted"] += 1
    assert outcomes["refused"] > 1000


@pytest.mark.django_db
@pytest.mark.parametrize("pattern", HOSTILE_PATTERNS)
def test_hostile_patterns_get_a_precise_error_through_the_cli_and_nothing_is_stored(
    pattern, tmp_path
):
    path = tmp_path / "policy.json"
    rule = {"name": "p", "detect": "pattern", "pattern": pattern, "action": "reject"}
    path.write_text(json.dumps({"contentRules": [rule]}))

    if pattern == "(a+)+$":
        assert "policy v1 is active" in a2a("policy", "set", str(path), "--reason", "ok")
        return
    with pytest.raises(CommandError) as refused:
        a2a("policy", "set", str(path), "--reason", "hostile")

    assert "contentRules.0" in str(refused.value)
    assert PolicyVersion.objects.count() == 0


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("rule", "says"),
    [
        (
            {"name": "a", "detect": "email", "direction": "both", "action": "hold"},
            "an answer cannot be held",
        ),
        (
            {"name": "a", "detect": "card", "examples": ["4111 1111 1111 1112"]},
            "example 0 ('4111 1111 1111 1112') does not match this rule's card detector",
        ),
        ({"name": "a", "detect": "card", "pattern": "x"}, "`pattern` is required with"),
        ({"name": "a", "detect": "fingerprints"}, "contentRules.0.detect"),
        ({"name": "a", "detect": "card", "callers": ["Not A Slug"]}, "contentRules.0.callers"),
    ],
)
def test_invalid_content_rules_get_a_precise_error_through_the_cli(rule, says, tmp_path):
    path = tmp_path / "policy.json"
    path.write_text(json.dumps({"contentRules": [rule]}))

    with pytest.raises(CommandError) as refused:
        a2a("policy", "set", str(path), "--reason", "bad")

    assert says in str(refused.value)
    assert PolicyVersion.objects.count() == 0


@pytest.mark.django_db
def test_too_many_or_twice_named_content_rules_are_refused():
    rule = {"name": "cards", "detect": "card"}
    with pytest.raises(ValidationFailed, match="repeated: \\['cards'\\]"):
        parse_policy({"contentRules": [rule, rule]})
    many = [{"name": f"r{i}", "detect": "card"} for i in range(201)]
    with pytest.raises(ValidationFailed) as refused:
        parse_policy({"contentRules": many})
    assert refused.value.problems[0].field == "contentRules"


def nested(depth: int, leaf: Any) -> Any:
    for _ in range(depth):
        leaf = {"x": [leaf]}
    return leaf


@pytest.mark.live
async def test_hostile_messages_with_every_detector_on_get_no_5xx_and_are_stored_masked(hub, sdk):
    detectors = ["secrets", "card", "iban", "email", "phone"]
    rules = [{"name": d, "detect": d, "action": "redact"} for d in detectors]
    rules.append({"name": "evil", "detect": "pattern", "pattern": "(a+)+$", "action": "redact"})
    await db(policy_publish, document={"contentRules": rules}, reason="all", actor_label="t")
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    bodies = [
        "4" * 900_000,  # one huge run of digits
        "+1 " * 250_000,  # phone-like junk
        "a" * 900_000 + "b",  # the evil pattern's worst case
        "x@" * 400_000,  # email-like junk
        ("password = '" + "k" * 50 + "' ") * 10_000,  # many secrets
        "AKIA" * 200_000,
        "\ud7ff\U0001f4a5" * 40_000,
    ]
    parts: list[list[dict[str, Any]]] = [[{"text": body}] for body in bodies]
    parts.append([{"data": nested(60, "4111111111111111")}])
    parts.append([{"text": "4111111111111111"} for _ in range(2000)])
    async with httpx.AsyncClient(base_url=hub.url, timeout=120) as raw:
        for i, message_parts in enumerate(parts):
            response = await raw.post(
                "/a2a/echo",
                json={
                    "jsonrpc": "2.0",
                    "id": i,
                    "method": "SendMessage",
                    "params": {
                        "message": {
                            "messageId": f"hostile-{i}",
                            "role": "ROLE_USER",
                            "parts": message_parts,
                        },
                        "configuration": {"returnImmediately": True},
                    },
                },
                headers={"Authorization": f"Bearer {token}", "A2A-Version": "1.0"},
            )
            assert response.status_code < 500, (i, response.text[:300])

    # The hub still serves, and what it stored of the card numbers is masked.
    answer = await send(await sdk("echo", token), request("echo 4111111111111111"))
    assert [p.text for a in answer.artifacts for p in a.parts] == ["echo: [redacted: card]"]
    stored = await db(lambda: [m.parts for m in Message.objects.filter(message_id="hostile-8")])
    assert "4111111111111111" not in str(stored)
