"""decide(): every check, the order between them, and two properties that must always hold."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from a2a_core.policy.compiled import CompiledPolicy
from a2a_core.policy.content import Hit
from a2a_core.policy.decide import (
    REASONS,
    AgentState,
    BreakerView,
    Context,
    Facts,
    Usage,
    decide,
)
from a2a_core.schemas.policy import parse_policy

AGENTS = {
    "alpha": AgentState("alpha", "online", False, frozenset({"plan"})),
    "beta": AgentState("beta", "online", False, frozenset({"review"})),
    "gamma": AgentState("gamma", "online", False, frozenset({"review"})),
    "sleepy": AgentState("sleepy", "suspended", False, frozenset({"review"})),
    "ghost": AgentState("ghost", "offline", False, frozenset({"review"})),
    "scribe": AgentState("scribe", "offline", True, frozenset({"minutes"})),
}


def policy(**doc: Any) -> CompiledPolicy:
    return CompiledPolicy(parse_policy(doc))


def ctx(**kwargs: Any) -> Context:
    return Context(
        agents=kwargs.pop("agents", AGENTS),
        usage=kwargs.pop("usage", Usage()),
        breakers=kwargs.pop("breakers", {}),
        by_skill=kwargs.pop("by_skill", {"review": ("beta", "gamma", "sleepy", "ghost")}),
    )


def facts(caller: str = "alpha", target: str = "beta", **kwargs: Any) -> Facts:
    return Facts(caller=caller, target=target, chain=kwargs.pop("chain", (caller,)), **kwargs)


OPEN = BreakerView("open", retry_after=12.0)

# (name, policy document, facts, context, expected action, expected reason)
CASES = [
    ("plain delivery", {}, facts(), ctx(), "deliver", "ok"),
    ("kill switch", {"routingEnabled": False}, facts(), ctx(), "reject", "routing_disabled"),
    ("suspended caller", {}, facts(caller="sleepy"), ctx(), "reject", "caller_suspended"),
    ("unknown target", {}, facts(target="nobody"), ctx(), "reject", "unknown_target"),
    ("self routing", {}, facts(target="alpha"), ctx(), "reject", "self_routing"),
    (
        "matrix deny",
        {"matrix": [{"caller": "alpha", "target": "beta", "action": "deny"}]},
        facts(),
        ctx(),
        "reject",
        "denied_by_matrix",
    ),
    ("default deny", {"defaultAction": "deny"}, facts(), ctx(), "reject", "denied_by_matrix"),
    (
        "delegation beyond its initiator",
        {"matrix": [{"caller": "alpha", "target": "gamma", "action": "deny"}]},
        facts(caller="beta", target="gamma", chain=("alpha", "beta")),
        ctx(),
        "reject",
        "delegation_exceeds_initiator",
    ),
    (
        "allow overrides default deny",
        {
            "defaultAction": "deny",
            "matrix": [{"caller": "alpha", "target": "*", "action": "allow"}],
        },
        facts(),
        ctx(),
        "deliver",
        "ok",
    ),
    (
        "deny only for one kind",
        {"matrix": [{"caller": "*", "target": "beta", "action": "deny", "kinds": ["broadcast"]}]},
        facts(kind="request"),
        ctx(),
        "deliver",
        "ok",
    ),
    (
        "deny for that kind",
        {"matrix": [{"caller": "*", "target": "beta", "action": "deny", "kinds": ["broadcast"]}]},
        facts(kind="broadcast"),
        ctx(),
        "reject",
        "denied_by_matrix",
    ),
    (
        "deny for a skill",
        {"matrix": [{"caller": "alpha", "target": "beta", "action": "deny", "skills": ["review"]}]},
        facts(skill="review"),
        ctx(),
        "reject",
        "denied_by_matrix",
    ),
    ("hop limit", {"maxHops": 2}, facts(chain=("x", "y", "alpha")), ctx(), "reject", "hop_limit"),
    ("within hop limit", {"maxHops": 3}, facts(chain=("x", "y", "alpha")), ctx(), "deliver", "ok"),
    (
        "loop a-b-a",
        {},
        facts(caller="beta", target="alpha", chain=("alpha", "beta")),
        ctx(),
        "reject",
        "loop_detected",
    ),
    (
        "loop detection off",
        {"loopDetection": False},
        facts(caller="beta", target="alpha", chain=("alpha", "beta")),
        ctx(),
        "deliver",
        "ok",
    ),
    (
        "minute limit",
        {"limits": {"perMinute": 5}},
        facts(),
        ctx(usage=Usage(minute=5, minute_resets_in=17)),
        "reject",
        "rate_limit_minute",
    ),
    (
        "hour limit",
        {"limits": {"perHour": 100}},
        facts(),
        ctx(usage=Usage(hour=100)),
        "reject",
        "rate_limit_hour",
    ),
    (
        "concurrency limit",
        {"limits": {"concurrent": 2}},
        facts(),
        ctx(usage=Usage(inflight=2)),
        "reject",
        "rate_limit_concurrent",
    ),
    (
        "concurrency ignores continuations",
        {"limits": {"concurrent": 2}},
        facts(new_task=False),
        ctx(usage=Usage(inflight=2)),
        "deliver",
        "ok",
    ),
    (
        "incoming limit",
        {"limits": {"incomingPerMinute": 3}},
        facts(),
        ctx(usage=Usage(target_minute=3)),
        "reject",
        "rate_limit_incoming",
    ),
    (
        "per-agent limit override",
        {"limits": {"perMinute": 5}, "agentLimits": {"alpha": {"perMinute": 50}}},
        facts(),
        ctx(usage=Usage(minute=5)),
        "deliver",
        "ok",
    ),
    (
        "suspended target, no peer",
        {"redirects": []},
        facts(target="sleepy", skill="review"),
        ctx(),
        "reject",
        "target_suspended",
    ),
    (
        "suspended target redirected",
        {"matrix": [{"caller": "alpha", "target": "gamma", "action": "allow"}]},
        facts(target="sleepy", skill="review"),
        ctx(),
        "redirect",
        "redirected",
    ),
    (
        "offline endpoint",
        {"redirects": []},
        facts(target="ghost"),
        ctx(),
        "reject",
        "target_offline",
    ),
    ("offline inbox queues", {}, facts(target="scribe"), ctx(), "deliver", "ok"),
    (
        "a content rule rejects",
        {"contentRules": [{"name": "cards", "detect": "card", "action": "reject"}]},
        facts(content=(Hit("card", ("parts", 0, "text"), 0, 16),)),
        ctx(),
        "reject",
        "content_rejected",
    ),
    (
        "a content rule holds",
        {"contentRules": [{"name": "keys", "detect": "secrets", "action": "hold"}]},
        facts(content=(Hit("secrets", ("parts", 0, "text"), 0, 20),)),
        ctx(),
        "hold",
        "content_held",
    ),
    (
        "a content rule redacts",
        {"contentRules": [{"name": "mails", "detect": "email"}]},
        facts(content=(Hit("email", ("parts", 0, "text"), 3, 9),)),
        ctx(),
        "deliver",
        "content_redacted",
    ),
    (
        "a hit no rule in scope wants",
        {"contentRules": [{"name": "mails", "detect": "email", "callers": ["gamma"]}]},
        facts(content=(Hit("email", ("parts", 0, "text"), 3, 9),)),
        ctx(),
        "deliver",
        "ok",
    ),
    (
        "full inbox queue",
        {"agentLimits": {"scribe": {"inboxQueue": 10}}},
        facts(target="scribe"),
        ctx(usage=Usage(target_queue=10)),
        "reject",
        "queue_full",
    ),
    (
        "queue bound is for inbox agents only",
        {"limits": {"inboxQueue": 1}},
        facts(),
        ctx(usage=Usage(target_queue=5)),
        "deliver",
        "ok",
    ),
    (
        "open breaker",
        {"redirects": []},
        facts(),
        ctx(breakers={"beta": OPEN}),
        "reject",
        "circuit_open",
    ),
    (
        "open breaker redirected",
        {"matrix": [{"caller": "alpha", "target": "gamma", "action": "allow"}]},
        facts(skill="review"),
        ctx(breakers={"beta": OPEN}),
        "redirect",
        "redirected",
    ),
    (
        "half-open lets the probe through",
        {},
        facts(),
        ctx(breakers={"beta": BreakerView("half_open", probe_available=True)}),
        "deliver",
        "ok",
    ),
    (
        "half-open with the probe taken",
        {"redirects": []},
        facts(),
        ctx(breakers={"beta": BreakerView("half_open", 5.0, False)}),
        "reject",
        "circuit_open",
    ),
    (
        "breaker disabled",
        {"breaker": {"enabled": False}},
        facts(),
        ctx(breakers={"beta": OPEN}),
        "deliver",
        "ok",
    ),
    ("escalation held", {}, facts(kind="escalation"), ctx(), "hold", "approval_required"),
    (
        "urgent held by rule",
        {"approvals": [{"name": "urgent", "priorities": ["urgent"]}]},
        facts(priority="urgent"),
        ctx(),
        "hold",
        "approval_required",
    ),
    (
        "pair needs approval",
        {"matrix": [{"caller": "alpha", "target": "beta", "action": "approve"}]},
        facts(),
        ctx(),
        "hold",
        "approval_required",
    ),
    (
        "continuations are not held",
        {},
        facts(kind="escalation", new_task=False),
        ctx(),
        "deliver",
        "ok",
    ),
    (
        "skill approval",
        {"approvals": [{"name": "deploys", "skills": ["deploy"]}]},
        facts(skill="deploy"),
        ctx(),
        "hold",
        "approval_required",
    ),
]


@pytest.mark.parametrize(
    ("name", "doc", "fact", "context", "action", "reason"), CASES, ids=[c[0] for c in CASES]
)
def test_each_check(name, doc, fact, context, action, reason):
    decision = decide(fact, context, policy(**doc))
    assert (decision.action, decision.reason) == (action, reason)


# Each pair: the earlier check wins when both apply.
ORDER = [
    (
        "kill switch before everything",
        {"routingEnabled": False},
        facts(target="alpha"),
        "routing_disabled",
    ),
    (
        "suspended caller before matrix",
        {"defaultAction": "deny"},
        facts(caller="sleepy"),
        "caller_suspended",
    ),
    (
        "self routing before matrix",
        {"defaultAction": "deny"},
        facts(target="alpha"),
        "self_routing",
    ),
    (
        "matrix before hop limit",
        {"defaultAction": "deny", "maxHops": 1},
        facts(chain=("x", "alpha")),
        "denied_by_matrix",
    ),
    (
        "matrix before delegation",
        {"matrix": [{"caller": "*", "target": "alpha", "action": "deny"}]},
        facts(caller="beta", target="alpha", chain=("gamma", "beta")),
        "denied_by_matrix",
    ),
    (
        "delegation before hop limit",
        {"matrix": [{"caller": "gamma", "target": "beta", "action": "deny"}], "maxHops": 1},
        facts(caller="alpha", chain=("gamma", "alpha")),
        "delegation_exceeds_initiator",
    ),
    (
        "hop limit before loop",
        {"maxHops": 2},
        facts(caller="beta", target="alpha", chain=("alpha", "x", "beta")),
        "hop_limit",
    ),
    (
        "loop before rate limit",
        {"limits": {"perMinute": 1}},
        facts(caller="beta", target="alpha", chain=("alpha", "beta")),
        "loop_detected",
    ),
    ("rate limit before breaker", {"limits": {"perMinute": 1}}, facts(), "rate_limit_minute"),
    ("breaker before approval", {"redirects": []}, facts(kind="escalation"), "circuit_open"),
]


@pytest.mark.parametrize(("name", "doc", "fact", "reason"), ORDER, ids=[o[0] for o in ORDER])
def test_order_of_checks(name, doc, fact, reason):
    context = ctx(usage=Usage(minute=1), breakers={"beta": OPEN})
    assert decide(fact, context, policy(**doc)).reason == reason


def test_rate_limit_tells_when_to_retry():
    decision = decide(
        facts(), ctx(usage=Usage(minute=5, minute_resets_in=17.5)), policy(limits={"perMinute": 5})
    )
    assert decision.retry_after == 17.5
    assert "5 messages this minute (limit 5)" in decision.detail


def test_open_breaker_says_when_to_retry():
    decision = decide(facts(), ctx(breakers={"beta": OPEN}), policy(redirects=[]))
    assert decision.retry_after == 12.0


def test_redirect_goes_to_an_available_agent_with_the_skill_the_matrix_allows():
    doc = {
        "matrix": [
            {"caller": "alpha", "target": "beta", "action": "deny"},
            {"caller": "alpha", "target": "gamma", "action": "allow"},
        ]
    }
    decision = decide(facts(target="sleepy", skill="review"), ctx(), policy(**doc))
    assert (decision.action, decision.target) == ("redirect", "gamma")
    assert decision.detail == (
        "sleepy is suspended; redirected to gamma (shares skill 'review' and matrix rule "
        "alpha -> gamma lets alpha reach it)"
    )


def test_sharing_a_skill_id_alone_does_not_make_an_agent_a_stand_in():
    # The default lets alpha reach anyone, but no rule of the matrix names beta or gamma.
    decision = decide(facts(target="sleepy", skill="review"), ctx(), policy())
    assert (decision.action, decision.reason) == ("reject", "target_suspended")


def test_a_wildcard_matrix_rule_makes_skill_sharers_stand_ins():
    doc = {"matrix": [{"caller": "alpha", "target": "*", "action": "allow"}]}
    decision = decide(facts(target="sleepy", skill="review"), ctx(), policy(**doc))
    assert (decision.action, decision.target) == ("redirect", "beta")
    assert "matrix rule alpha -> * lets alpha reach it" in decision.detail


def test_redirect_to_a_named_agent():
    # The form of documents written before a rule could name several agents.
    doc = {"redirects": [{"targets": ["beta"], "when": ["circuit_open"], "to": "gamma"}]}
    decision = decide(facts(), ctx(breakers={"beta": OPEN}), policy(**doc))
    assert (decision.action, decision.target) == ("redirect", "gamma")
    assert decision.detail == (
        "beta failed repeatedly; its circuit breaker is open; redirected to gamma "
        "(named by the redirect rule for beta)"
    )


def test_the_first_named_agent_that_can_take_it_and_that_the_matrix_allows_is_chosen():
    doc = {
        "matrix": [{"caller": "alpha", "target": "scribe", "action": "deny"}],
        "redirects": [{"targets": ["beta"], "to": ["sleepy", "ghost", "scribe", "gamma"]}],
    }
    decision = decide(facts(), ctx(breakers={"beta": OPEN}), policy(**doc))
    assert (decision.action, decision.target) == ("redirect", "gamma")


def test_a_named_agent_is_never_one_the_matrix_denies():
    doc = {
        "matrix": [{"caller": "alpha", "target": "gamma", "action": "deny"}],
        "redirects": [{"targets": ["beta"], "to": ["gamma"]}],
    }
    decision = decide(facts(skill="review"), ctx(breakers={"beta": OPEN}), policy(**doc))
    assert decision.reason == "circuit_open"


def test_a_pair_needing_approval_is_held_however_long_its_agents_names_are():
    caller, target = "c" * 64, "t" * 64
    agents = {
        caller: AgentState(caller, "online", False),
        target: AgentState(target, "online", False),
    }
    doc = {"matrix": [{"caller": caller, "target": target, "action": "approve"}]}
    decision = decide(facts(caller, target), ctx(agents=agents), policy(**doc))
    assert decision.detail == f"matrix rule {caller} -> {target} needs approval"
    assert decision.approval.deadline_seconds is None  # as long as a question
    assert (decision.approval.callers, decision.approval.timeout_outcome) == ([caller], "reject")


def test_each_caller_held_by_a_wildcard_approve_rule_gets_a_rule_of_its_own():
    agents = {slug: AgentState(slug, "online", False) for slug in ("alpha", "beta", "gamma")}
    compiled = policy(matrix=[{"caller": "*", "target": "gamma", "action": "approve"}])
    first = decide(facts("alpha", "gamma"), ctx(agents=agents), compiled)
    second = decide(facts("beta", "gamma"), ctx(agents=agents), compiled)
    assert (first.action, second.action) == ("hold", "hold")
    assert first.approval.name == second.approval.name == "matrix rule * -> gamma needs approval"
    assert (first.approval.callers, second.approval.callers) == (["alpha"], ["beta"])


def test_a_stand_in_the_matrix_puts_under_approval_is_held_for_a_human():
    doc = {"matrix": [{"caller": "alpha", "target": "gamma", "action": "approve"}]}
    decision = decide(facts(target="sleepy", skill="review"), ctx(), policy(**doc))
    assert (decision.action, decision.reason, decision.target) == (
        "hold",
        "approval_required",
        "gamma",
    )
    assert decision.detail == (
        "sleepy is suspended; to be redirected to gamma (shares skill 'review' and matrix "
        "rule alpha -> gamma lets alpha reach it): matrix rule alpha -> gamma needs approval"
    )


def test_redirect_never_sends_back_up_the_chain():
    decision = decide(
        facts(caller="alpha", target="sleepy", skill="review", chain=("beta", "gamma", "alpha")),
        ctx(),
        policy(),
    )
    assert decision.reason == "target_suspended"


def test_half_open_delivery_is_marked_as_the_probe():
    decision = decide(
        facts(), ctx(breakers={"beta": BreakerView("half_open", probe_available=True)}), policy()
    )
    assert decision.probe


def test_held_decision_carries_the_rule_deadline_and_outcome():
    doc = {
        "approvals": [
            {
                "name": "urgent",
                "priorities": ["urgent"],
                "deadlineSeconds": 60,
                "timeoutOutcome": "approve",
            }
        ]
    }
    decision = decide(facts(priority="urgent"), ctx(), policy(**doc))
    assert decision.approval.deadline_seconds == 60
    assert decision.approval.timeout_outcome == "approve"


def test_most_specific_matrix_rule_wins():
    doc = {
        "matrix": [
            {"caller": "*", "target": "*", "action": "deny"},
            {"caller": "alpha", "target": "*", "action": "approve"},
            {"caller": "alpha", "target": "beta", "action": "allow"},
        ]
    }
    compiled = policy(**doc)
    assert decide(facts(), ctx(), compiled).reason == "ok"
    assert decide(facts(target="gamma"), ctx(), compiled).reason == "approval_required"
    assert (
        decide(facts(caller="beta", target="gamma", chain=("beta",)), ctx(), compiled).reason
        == "denied_by_matrix"
    )


# --- delegation within the initiator's scope -------------------------------------------------

A_B_C = {
    "matrix": [
        {"caller": "alpha", "target": "beta", "action": "allow"},
        {"caller": "beta", "target": "gamma", "action": "allow"},
        {"caller": "alpha", "target": "gamma", "action": "deny"},
    ]
}
THROUGH_BETA = facts(caller="beta", target="gamma", chain=("alpha", "beta"))


def test_a_delegated_call_the_root_may_not_make_is_refused_naming_root_via_and_target():
    decision = decide(THROUGH_BETA, ctx(), policy(**A_B_C))
    assert (decision.action, decision.reason) == ("reject", "delegation_exceeds_initiator")
    assert decision.detail == (
        "alpha -> gamma is denied by matrix rule alpha -> gamma, so beta may not call gamma "
        "for alpha (chain alpha -> beta -> gamma); a rule alpha -> gamma via beta would grant it"
    )
    # The first call of the chain, and beta calling gamma on its own, are not delegations.
    assert decide(facts(), ctx(), policy(**A_B_C)).reason == "ok"
    assert decide(facts("beta", "gamma"), ctx(), policy(**A_B_C)).reason == "ok"


def grant(via: Any, action: str = "allow", **more: Any) -> dict[str, Any]:
    rule = {"caller": "alpha", "target": "gamma", "via": via, "action": action, **more}
    return {"matrix": [*A_B_C["matrix"], rule]}


def test_a_rule_with_via_grants_the_delegation_and_never_a_direct_call():
    compiled = policy(**grant("beta"))
    assert decide(THROUGH_BETA, ctx(), compiled).reason == "ok"
    direct = decide(facts("alpha", "gamma"), ctx(), compiled)
    assert (direct.reason, direct.detail) == (
        "denied_by_matrix",
        "alpha -> gamma is denied by matrix rule alpha -> gamma",
    )


def test_a_grant_covers_only_chains_whose_every_middle_agent_it_names():
    through_two = facts(caller="beta", target="gamma", chain=("alpha", "scribe", "beta"))
    assert decide(through_two, ctx(), policy(**grant("beta"))).reason == (
        "delegation_exceeds_initiator"
    )
    assert decide(through_two, ctx(), policy(**grant(["scribe", "beta"]))).reason == "ok"
    assert decide(through_two, ctx(), policy(**grant("*"))).reason == "ok"
    assert decide(THROUGH_BETA, ctx(), policy(**grant("scribe"))).reason == (
        "delegation_exceeds_initiator"
    )


def test_a_grant_for_some_kinds_leaves_the_others_refused():
    compiled = policy(**grant("beta", kinds=["question"]))
    assert decide(THROUGH_BETA, ctx(), compiled).reason == "delegation_exceeds_initiator"
    question = facts(caller="beta", target="gamma", chain=("alpha", "beta"), kind="question")
    assert decide(question, ctx(), compiled).reason == "ok"


def test_a_via_rule_can_refuse_or_hold_a_delegation_the_root_could_make_itself():
    allowed = {"matrix": A_B_C["matrix"][:2]}  # alpha -> gamma: the default, allow
    deny = {"caller": "alpha", "target": "gamma", "via": "beta", "action": "deny"}
    refused = decide(THROUGH_BETA, ctx(), policy(matrix=[*allowed["matrix"], deny]))
    assert refused.reason == "delegation_exceeds_initiator"
    assert "matrix rule alpha -> gamma via beta" in refused.detail
    held = decide(THROUGH_BETA, ctx(), policy(**grant("beta", "approve")))
    assert (held.action, held.reason) == ("hold", "approval_required")
    assert held.approval is not None
    assert held.approval.name == "matrix rule alpha -> gamma via beta needs approval"


def test_under_a_default_deny_a_chain_reaches_only_what_its_root_may():
    doc = {"defaultAction": "deny", "matrix": A_B_C["matrix"][:2]}
    assert decide(THROUGH_BETA, ctx(), policy(**doc)).reason == "delegation_exceeds_initiator"
    everyone = {"caller": "*", "target": "*", "via": "*", "action": "allow"}
    doc["matrix"] = [*doc["matrix"], everyone]
    assert decide(THROUGH_BETA, ctx(), policy(**doc)).reason == "ok"


def test_under_the_default_allow_chains_are_judged_as_before():
    doc = {"matrix": A_B_C["matrix"][:2]}
    chain = facts(caller="beta", target="gamma", chain=("alpha", "beta"))
    assert decide(chain, ctx(), policy(**doc)).reason == "ok"


def test_a_call_back_to_the_root_is_a_loop_not_a_delegation_beyond_it():
    doc = {
        "defaultAction": "deny",
        "matrix": [{"caller": "beta", "target": "alpha", "action": "allow"}],
    }
    back = facts(caller="beta", target="alpha", chain=("alpha", "beta"))
    assert decide(back, ctx(), policy(**doc)).reason == "loop_detected"


def test_a_redirect_never_hands_a_delegated_call_to_an_agent_its_root_may_not_reach():
    doc = {
        "matrix": [{"caller": "alpha", "target": "gamma", "action": "deny"}],
        "redirects": [{"targets": ["sleepy"], "to": ["gamma", "beta"]}],
    }
    chained = facts(caller="scribe", target="sleepy", chain=("alpha", "scribe"))
    decision = decide(chained, ctx(), policy(**doc))
    assert (decision.action, decision.target) == ("redirect", "beta")


def test_via_is_stored_only_on_rules_that_have_it():
    document = parse_policy(grant("beta")).as_document()
    assert [rule.get("via") for rule in document["matrix"]] == [None, None, None, ["beta"]]


# --- properties -----------------------------------------------------------------------------

slugs = st.sampled_from(["alpha", "beta", "gamma", "sleepy", "ghost", "scribe"])
actions = st.sampled_from(["allow", "deny", "approve"])
rules = st.lists(
    st.fixed_dictionaries(
        {
            "caller": st.one_of(slugs, st.just("*")),
            "target": st.one_of(slugs, st.just("*")),
            "action": actions,
        }
    ),
    max_size=12,
)
fact_strategy = st.builds(
    Facts,
    caller=slugs,
    target=slugs,
    kind=st.sampled_from(["request", "question", "escalation", "broadcast"]),
    skill=st.sampled_from(["", "review", "plan"]),
    priority=st.sampled_from(["low", "normal", "urgent"]),
    chain=st.lists(slugs, max_size=8).map(tuple),
    new_task=st.booleans(),
)
usage = st.builds(
    Usage,
    minute=st.integers(0, 100),
    hour=st.integers(0, 5000),
    inflight=st.integers(0, 30),
    target_minute=st.integers(0, 100),
)
breakers = st.dictionaries(
    slugs,
    st.sampled_from(
        [OPEN, BreakerView("half_open", 1.0, True), BreakerView("half_open", 1.0, False)]
    ),
    max_size=3,
)


@settings(max_examples=400, deadline=None)
@given(rules, st.sampled_from(["allow", "deny", "approve"]), fact_strategy, usage, breakers)
def test_nothing_is_ever_delivered_to_a_pair_the_matrix_denies(matrix, default, fact, use, brk):
    compiled = policy(matrix=matrix, defaultAction=default)
    decision = decide(fact, ctx(usage=use, breakers=brk), compiled)
    if decision.delivers:
        action, _ = compiled.matrix_action(fact.caller, decision.target, fact.kind, fact.skill)
        assert action != "deny"


@settings(max_examples=400, deadline=None)
@given(rules, st.lists(slugs, max_size=3), fact_strategy, breakers)
def test_a_redirect_goes_only_to_a_named_agent_or_one_a_matrix_rule_lets_the_caller_reach(
    matrix, named, fact, brk
):
    compiled = policy(matrix=matrix, redirects=[{"to": named}, {}])
    decision = decide(fact, ctx(breakers=brk), compiled)
    if decision.action == "redirect":
        rule = compiled.matrix_rule(fact.caller, decision.target, fact.kind, fact.skill)
        assert decision.target in named or (rule is not None and rule.action == "allow")
        assert decision.target not in (fact.caller, fact.target, *fact.chain)


@settings(max_examples=400, deadline=None)
@given(rules, st.sampled_from(["allow", "deny"]), fact_strategy, usage, breakers)
def test_no_delegated_call_reaches_a_target_its_root_may_not_without_a_grant(
    matrix, default, fact, use, brk
):
    compiled = policy(matrix=matrix, defaultAction=default, redirects=[{}])
    decision = decide(fact, ctx(usage=use, breakers=brk), compiled)
    if decision.delivers and len(fact.chain) >= 2 and fact.chain[0] != decision.target:
        action, _ = compiled.matrix_action(fact.chain[0], decision.target, fact.kind, fact.skill)
        assert action != "deny"


@settings(max_examples=400, deadline=None)
@given(st.integers(1, 6), fact_strategy, usage, breakers)
def test_a_chain_never_exceeds_the_hop_limit(max_hops, fact, use, brk):
    decision = decide(fact, ctx(usage=use, breakers=brk), policy(maxHops=max_hops))
    if decision.action != "reject":
        assert fact.hop <= max_hops


def test_every_reason_code_has_a_case_above():
    assert {case[5] for case in CASES} == set(REASONS)
