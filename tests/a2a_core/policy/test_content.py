"""The content detectors and the rules' verdict: pure functions, tested without a hub."""

from __future__ import annotations

from typing import Any

import pytest

from a2a_core.policy.compiled import CompiledPolicy
from a2a_core.policy.content import (
    BUILTIN,
    ContentRules,
    content_scan,
    content_verdict,
    redact,
    texts,
)
from a2a_core.policy.decide import AgentState, Context, Facts, decide
from a2a_core.schemas.policy import ContentRule, parse_policy


def found(detector: str, text: str) -> list[str]:
    return [text[a:b] for a, b in BUILTIN[detector](text)]


@pytest.mark.parametrize(
    ("detector", "text", "expected"),
    [
        ("secrets", "my key is AKIAIOSFODNN7EXAMPLE ok", ["AKIAIOSFODNN7EXAMPLE"]),
        ("secrets", 'password = "correct-horse-battery"', ["correct-horse-battery"]),
        ("secrets", "slack xoxb-123456789012-abcdefghijkl", ["xoxb-123456789012-abcdefghijkl"]),
        (
            "secrets",
            "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----",
            ["BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----"],
        ),
        ("card", "pay 4111 1111 1111 1111 now", ["4111 1111 1111 1111"]),
        ("card", "amex 3782-822463-10005", ["3782-822463-10005"]),
        ("iban", "to GB82 WEST 1234 5698 7654 32 please", ["GB82 WEST 1234 5698 7654 32"]),
        ("iban", "DE89370400440532013000", ["DE89370400440532013000"]),
        ("email", "write to jane.doe@example.com.", ["jane.doe@example.com"]),
        ("phone", "call +1 415-555-0132 today", ["+1 415-555-0132"]),
        ("phone", "London +44 20 7946 0958", ["+44 20 7946 0958"]),
    ],
)
def test_each_detector_finds_what_it_looks_for(detector, text, expected):
    assert found(detector, text) == expected


@pytest.mark.parametrize(
    ("detector", "text"),
    [
        # 16 digits that fail the Luhn checksum are not a card number.
        ("card", "order 4111 1111 1111 1112"),
        ("card", "order 1234567812345678"),
        # A run of digits longer than a card is not one either, whatever its prefix.
        ("card", "id 41111111111111110000000"),
        ("iban", "GB82 WEST 1234 5698 7654 33"),  # wrong check digits
        ("email", "the user@localhost and not@an"),
        ("phone", "call 415-555-0132"),  # not in international form
        ("phone", "+1 000-000-0000"),  # not a valid number
        ("secrets", "the commit 3f786850e387550fdab836ed7e6dc881de23001b is fine"),
        ("secrets", "I forgot my password again"),
        ("secrets", "Please review the login page before Friday."),
    ],
)
def test_each_detector_leaves_look_alikes_alone(detector, text):
    assert found(detector, text) == []


def rule(**fields: Any) -> ContentRule:
    return ContentRule.model_validate({"name": "r", "detect": "card", **fields})


def scope(**overrides: Any) -> dict[str, Any]:
    return {"direction": "request", "caller": "alpha", "target": "beta", **overrides}


def test_text_data_and_file_parts_are_scanned_metadata_and_raw_bytes_are_not():
    message = {
        "parts": [
            {"text": "a"},
            {"data": {"x": [1, {"y": "b"}], "flag": True, "none": None}},
            {"url": "https://c.example/", "filename": "d.txt"},
            {"raw": "ZQ==", "metadata": {"secret": "no"}},
            {"file": {"uri": "e://", "name": "f"}},
        ]
    }

    assert texts(message["parts"]) == [
        (("parts", 0, "text"), "a"),
        (("parts", 1, "data", "x", 0), "1"),
        (("parts", 1, "data", "x", 1, "y"), "b"),
        (("parts", 2, "url"), "https://c.example/"),
        (("parts", 2, "filename"), "d.txt"),
        (("parts", 4, "file", "uri"), "e://"),
        (("parts", 4, "file", "name"), "f"),
    ]


def test_only_the_detectors_of_rules_in_scope_run():
    rules = ContentRules(
        [
            rule(name="cards for beta", targets=["beta"]),
            rule(name="emails from gamma", detect="email", callers=["gamma"]),
            rule(name="answers", detect="email", direction="answer"),
        ]
    )
    message = {"parts": [{"text": "4111111111111111 jane@example.com"}]}

    hits = content_scan(message, rules, **scope())

    assert {hit.detector for hit in hits} == {"card"}


def test_the_strongest_action_wins_and_every_finding_is_masked():
    rules = ContentRules(
        [
            rule(name="cards", action="redact"),
            rule(name="mails", detect="email", action="reject", reason="no addresses"),
            rule(name="cards again", action="hold"),
        ]
    )
    message = {"parts": [{"text": "card 4111111111111111, mail jane@example.com"}]}
    hits = content_scan(message, rules, **scope())

    verdict = content_verdict(hits, rules, **scope())

    assert (verdict.action, verdict.rule, verdict.kind, verdict.reason) == (
        "reject",
        "mails",
        "email",
        "no addresses",
    )
    assert [f.rule for f in verdict.findings] == ["mails", "cards"]
    masked = redact(message, verdict.findings)
    assert masked == {"parts": [{"text": "card [redacted: card], mail [redacted: email]"}]}
    assert message == {"parts": [{"text": "card 4111111111111111, mail jane@example.com"}]}
    assert [f.as_record() for f in verdict.findings] == [
        {"rule": "mails", "kind": "email", "where": "parts[0].text", "start": 28, "length": 16},
        {"rule": "cards", "kind": "card", "where": "parts[0].text", "start": 5, "length": 16},
    ]


def test_a_number_in_data_is_masked_whole():
    rules = ContentRules([rule(name="cards")])
    message = {"parts": [{"data": {"card": 4111111111111111.0, "n": 3}}]}
    verdict = content_verdict(content_scan(message, rules, **scope()), rules, **scope())

    assert redact(message, verdict.findings)["parts"][0]["data"] == {
        "card": "[redacted: card]",
        "n": 3,
    }


def test_decide_rejects_holds_or_redacts_after_the_matrix_and_the_chain():
    agents = {
        "alpha": AgentState("alpha", "online", False),
        "beta": AgentState("beta", "online", False),
    }
    message = {"parts": [{"text": "TICKET-1234 and 4111111111111111"}]}

    def judged(document: dict[str, Any]) -> Any:
        policy = CompiledPolicy(parse_policy(document))
        hits = content_scan(message, policy.content, **scope())
        return decide(Facts("alpha", "beta", content=hits), Context(agents=agents), policy)

    tickets = {"name": "tickets", "detect": "pattern", "pattern": "TICKET-[0-9]+"}
    cards = {"name": "cards", "detect": "card"}

    rejected = judged({"contentRules": [{**tickets, "action": "reject"}, cards]})
    held = judged({"contentRules": [{**tickets, "action": "hold"}, cards]})
    redacted = judged({"contentRules": [{**tickets, "action": "redact"}, cards]})
    denied = judged({"defaultAction": "deny", "contentRules": [{**tickets, "action": "reject"}]})

    assert (rejected.action, rejected.reason) == ("reject", "content_rejected")
    assert rejected.detail == "content rule 'tickets' found tickets"
    assert (held.action, held.reason, held.target) == ("hold", "content_held", "beta")
    assert (redacted.action, redacted.reason) == ("deliver", "content_redacted")
    assert redacted.detail == "redacted card by 'cards', tickets by 'tickets'"
    assert denied.reason == "denied_by_matrix"


# --- hostile input --------------------------------------------------------------------------


def test_a_hostile_pattern_runs_in_linear_time_on_a_huge_message():
    # (a+)+$ on "aaaa...b" backtracks catastrophically in Python's re; RE2 does not.
    rules = ContentRules([rule(name="evil", detect="pattern", pattern="(a+)+$")])
    message = {"parts": [{"text": "a" * 200_000 + "b"}]}

    hits = content_scan(message, rules, **scope())

    assert hits == ()


def test_a_huge_message_of_every_kind_is_scanned_whole():
    rules = ContentRules(
        [rule(name=d, detect=d) for d in ("secrets", "card", "iban", "email", "phone")]
    )
    filler = "lorem ipsum 12 34 + @ dolor " * 40_000  # about 1 MB
    message = {"parts": [{"text": filler + "AKIAIOSFODNN7EXAMPLE"}]}

    hits = content_scan(message, rules, **scope())

    assert [h.detector for h in hits] == ["secrets"]


def test_deeply_nested_data_neither_crashes_nor_hides_what_is_within_reach():
    deep: Any = "4111111111111111"
    for _ in range(10_000):
        deep = {"x": [deep]}
    shallow = {"a": {"b": "4111111111111111"}}
    rules = ContentRules([rule(name="cards")])
    message = {"parts": [{"data": deep}, {"data": shallow}]}

    hits = content_scan(message, rules, **scope())

    assert [h.path for h in hits] == [("parts", 1, "data", "a", "b")]


@pytest.mark.parametrize(
    "parts",
    [None, "text", [None, 1, "x", []], [{"text": 5}, {"data": float("nan")}], [{"file": "x"}]],
)
def test_junk_parts_are_skipped_not_fatal(parts):
    rules = ContentRules([rule(name="cards")])

    assert content_scan({"parts": parts}, rules, **scope()) == ()


def test_the_one_pass_prefilter_hides_nothing_any_detector_finds():
    samples = [
        "key AKIAIOSFODNN7EXAMPLE",
        'password = "correct-horse-battery"',
        "pay 4111 1111 1111 1111",
        "to GB82 WEST 1234 5698 7654 32",
        "mail jane@example.com",
        "call +44 20 7946 0958",
        "see TICKET-1234 or ticket-99",
        "nothing here at all 1234",
    ]
    rules = [rule(name=d, detect=d) for d in ("secrets", "card", "iban", "email", "phone")] + [
        rule(name="tickets", detect="pattern", pattern="(?i)ticket-[0-9]+")
    ]
    together = ContentRules(rules)
    for text in samples:
        message = {"parts": [{"text": text}]}
        alone = sorted(
            (hit.detector, hit.start)
            for one in rules
            for hit in content_scan(message, ContentRules([one]), **scope())
        )
        both = sorted((h.detector, h.start) for h in content_scan(message, together, **scope()))
        assert both == alone, text
