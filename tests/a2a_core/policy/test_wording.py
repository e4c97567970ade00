"""A policy change reads as words, one line per change."""

from __future__ import annotations

from a2a_core.policy.wording import policy_changes


def test_every_part_of_a_policy_change_is_worded():
    before = {
        "matrix": [
            {"caller": "director", "target": "ledger", "action": "allow"},
            {"caller": "monitor", "target": "*", "action": "deny", "kinds": ["alert"]},
        ],
        "agentLimits": {"monitor": {"perMinute": 5}},
    }
    after = {
        "routingEnabled": False,
        "defaultAction": "deny",
        "matrix": [
            {"caller": "director", "target": "ledger", "action": "deny"},
            {"caller": "ops", "target": "ledger", "action": "approve"},
        ],
        "limits": {"perMinute": 30},
        "agentLimits": {"scribe": {"perHour": 100}},
        "maxHops": 3,
        "breaker": {"failureThreshold": 2},
        "approvals": [],
        "redirects": [{"targets": ["flaky"], "when": ["circuit_open"], "to": "ping"}],
    }

    assert policy_changes(before, after) == [
        "routing: running → stopped",
        "pairs without a rule: allow → deny",
        "director → ledger: allow → deny",
        "monitor → * (only kinds alert): rule removed (was deny)",
        "ops → ledger: needs approval (new rule)",
        "limits: messages per minute: 600 → 30",
        "monitor's own limits removed",
        "scribe's own limits added",
        "scribe's limits: messages per hour: 20000 → 100",
        "longest delegation chain (hops): 5 → 3",
        "circuit breaker: failures before it opens: 5 → 2",
        "approval rule removed: escalations need a human",
        "redirect rule removed: * when suspended, circuit_open → another agent with the skill",
        "redirect rule added: flaky when circuit_open → ping",
    ]


def test_the_same_policy_written_two_ways_has_no_changes():
    assert policy_changes({}, {"defaultAction": "allow", "maxHops": 5}) == []


def test_a_question_deadline_reads_as_seconds_or_the_hubs_default():
    before = {"limits": {"questionDeadlineSeconds": 600}}
    after = {"agentLimits": {"scribe": {"questionDeadlineSeconds": 120}}}
    assert policy_changes(before, after) == [
        "limits: question deadline (s): 600 → the hub's default",
        "scribe's own limits added",
        "scribe's limits: question deadline (s): 600 → 120",
    ]


def test_content_rule_changes_are_worded_by_rule_name():
    cards = {"name": "cards", "detect": "card", "action": "redact"}
    tickets = {
        "name": "tickets",
        "detect": "pattern",
        "pattern": "TICKET-[0-9]{4}",
        "direction": "both",
        "action": "reject",
        "callers": ["monitor"],
    }
    keys = {"name": "keys", "detect": "secrets", "action": "hold"}

    changes = policy_changes(
        {"contentRules": [cards, keys]},
        {"contentRules": [{**cards, "action": "reject"}, tickets]},
    )

    assert changes == [
        "content rule removed: keys: secrets in requests → held for a human",
        "content rule changed: cards: card in requests → redacted ⇒ cards: card in requests → "
        "rejected",
        "content rule added: tickets: pattern TICKET-[0-9]{4} in requests and answers "
        "(only callers monitor) → rejected",
    ]


def test_a_delegation_grant_reads_with_the_agents_it_passes_through():
    grant = {"caller": "pm", "target": "tester", "via": "architect", "action": "allow"}
    assert policy_changes({}, {"matrix": [grant]}) == [
        "pm → tester via architect: allow (new rule)"
    ]
    assert policy_changes({"matrix": [grant]}, {"matrix": [{**grant, "action": "deny"}]}) == [
        "pm → tester via architect: allow → deny"
    ]
    # The same pair without `via` is another rule.
    direct = {"caller": "pm", "target": "tester", "action": "deny"}
    assert policy_changes({"matrix": [grant]}, {"matrix": [grant, direct]}) == [
        "pm → tester: deny (new rule)"
    ]
