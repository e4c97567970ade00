"""`decide(facts, context, policy) -> Decision`: the policy's judgement on one message.

Pure: no ORM, no I/O, no clock — everything it needs is in its arguments, so it is fast,
deterministic and tested in isolation. The checks, in order (the first that applies wins):

 1. routing_disabled    the global kill switch is off
 2. caller_suspended    the caller is suspended (the per-agent kill switch)
 3. unknown_target      the target is not registered
 4. self_routing        an agent addressing itself
 5. denied_by_matrix    a matrix rule (or the default) denies the pair, kind or skill
 6. delegation_exceeds_initiator
                        a call at hop 2 or deeper: the matrix denies the chain's root caller
                        the target (the same kinds and skills matching), and no rule with
                        `via` grants the delegation (see `delegation_check`)
 7. hop_limit           the delegation chain would grow past max_hops
 8. loop_detected       the target is already on the chain (A -> B -> A)
 8b. content_rejected / content_held
                        a content rule finds what it looks for in the message (a secret, a
                        card number, a pattern...) and rejects it or holds it for a human; a
                        rule that redacts lets it go on (reason content_redacted when nothing
                        else holds or redirects it), its matches replaced
 9. rate_limit_*        the caller's minute/hour/concurrency limits, the target's incoming limit
    queue_full          an inbox target has as many deliveries waiting as its queue holds
10. target_suspended / target_offline / circuit_open
                        the target cannot take it now; a redirect rule may send it to an
                        agent it names, or to one with the same skill that a matrix rule lets
                        the caller reach (reason "redirected", the detail says which and why)
11. approval_required   a matrix "approve" rule or an approval rule: a human decides
12. ok                  deliver
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from a2a_core.policy.compiled import CompiledPolicy
from a2a_core.policy.content import Finding, Hit, content_verdict
from a2a_core.schemas.policy import ANY, ApprovalRule, RateLimits

ActionName = Literal["deliver", "hold", "redirect", "reject"]

REASONS = (
    "routing_disabled",
    "caller_suspended",
    "unknown_target",
    "self_routing",
    "denied_by_matrix",
    "delegation_exceeds_initiator",
    "hop_limit",
    "loop_detected",
    "rate_limit_minute",
    "rate_limit_hour",
    "rate_limit_concurrent",
    "rate_limit_incoming",
    "queue_full",
    "target_suspended",
    "target_offline",
    "circuit_open",
    "redirected",
    "approval_required",
    "content_rejected",
    "content_held",
    "content_redacted",
    "ok",
)


@dataclass(frozen=True, slots=True)
class AgentState:
    slug: str
    status: str  # online | idle | busy | suspended | offline
    inbox: bool  # an inbox agent that is offline still queues work
    skills: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Facts:
    """What the message is."""

    caller: str
    target: str
    kind: str = "request"
    skill: str = ""
    priority: str = "normal"
    # Agents on the delegation chain so far, from the root caller to this caller.
    chain: tuple[str, ...] = ()
    # A new task (not a message continuing one): only new tasks count towards concurrency,
    # need approval or can be redirected.
    new_task: bool = True
    # What the detectors found in the message's parts (`policy.content.content_scan`).
    content: tuple[Hit, ...] = ()

    @property
    def hop(self) -> int:
        """How many calls deep this one is (a first call is hop 1)."""
        return max(1, len(self.chain))


@dataclass(frozen=True, slots=True)
class Usage:
    """The caller's and the target's counts so far in the current windows."""

    minute: int = 0
    hour: int = 0
    inflight: int = 0
    target_minute: int = 0
    # Deliveries waiting for an inbox target (not acknowledged yet).
    target_queue: int = 0
    minute_resets_in: float = 60.0
    hour_resets_in: float = 3600.0


@dataclass(frozen=True, slots=True)
class BreakerView:
    state: Literal["closed", "open", "half_open"] = "closed"
    retry_after: float = 0.0
    # Half-open: whether the one trial call is still free to take.
    probe_available: bool = False
    # Consecutive failures so far (a closed breaker may be counting towards opening).
    failures: int = 0


CLOSED = BreakerView()


@dataclass(frozen=True)
class Context:
    """The state the decision depends on, gathered by the caller of `decide`."""

    agents: Mapping[str, AgentState]
    usage: Usage = field(default_factory=Usage)
    breakers: Mapping[str, BreakerView] = field(default_factory=dict)
    # skill id -> slugs of agents that have it (redirect candidates)
    by_skill: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Decision:
    action: ActionName
    reason: str
    detail: str = ""
    # Where the message goes: the target, or the agent it is redirected to.
    target: str = ""
    retry_after: float | None = None
    approval: ApprovalRule | None = None
    # The target's breaker is half-open and this message is its trial call.
    probe: bool = False
    # What content rules matched: stored and shown masked, delivered redacted unless a
    # human approves a held message.
    content: tuple[Finding, ...] = ()

    @property
    def delivers(self) -> bool:
        return self.action in ("deliver", "redirect")


# When a full inbox queue may have room again: a guess, the agent's pace decides.
QUEUE_RETRY_SECONDS = 5.0


def _reject(reason: str, detail: str, retry_after: float | None = None) -> Decision:
    return Decision("reject", reason, detail, retry_after=retry_after)


# --- the checks -----------------------------------------------------------------------------


def _rate_limit(
    facts: Facts, usage: Usage, limits: RateLimits, target_limits: RateLimits
) -> Decision | None:
    if limits.per_minute is not None and usage.minute >= limits.per_minute:
        return _reject(
            "rate_limit_minute",
            f"{facts.caller} sent {usage.minute} messages this minute (limit {limits.per_minute})",
            usage.minute_resets_in,
        )
    if limits.per_hour is not None and usage.hour >= limits.per_hour:
        return _reject(
            "rate_limit_hour",
            f"{facts.caller} sent {usage.hour} messages this hour (limit {limits.per_hour})",
            usage.hour_resets_in,
        )
    if facts.new_task and limits.concurrent is not None and usage.inflight >= limits.concurrent:
        return _reject(
            "rate_limit_concurrent",
            f"{facts.caller} has {usage.inflight} tasks in flight (limit {limits.concurrent})",
            1.0,
        )
    incoming = target_limits.incoming_per_minute
    if incoming is not None and usage.target_minute >= incoming:
        return _reject(
            "rate_limit_incoming",
            f"{facts.target} received {usage.target_minute} messages this minute (limit {incoming})",
            usage.minute_resets_in,
        )
    return None


def why_unavailable(
    target: AgentState, breaker: BreakerView
) -> tuple[str, str, float | None] | None:
    """(why, detail, retry_after) when the target cannot take a message now."""
    if target.status == "suspended":
        return "suspended", f"{target.slug} is suspended", None
    if target.status == "offline" and not target.inbox:
        return "offline", f"{target.slug} is offline", None
    if breaker.state == "open" or (breaker.state == "half_open" and not breaker.probe_available):
        return (
            "circuit_open",
            f"{target.slug} failed repeatedly; its circuit breaker is open",
            max(breaker.retry_after, 1.0),
        )
    return None


@dataclass(frozen=True, slots=True)
class Delegation:
    """How the matrix judges a delegated call against its chain's root caller."""

    action: str  # allow | deny | approve
    why: str  # the rule (or the default) that gives `action`
    granted: bool  # by a rule with `via`


# What the root check gives where the matrix cannot deny the root the target.
_NOT_DENIED = Delegation("allow", "", granted=False)


def delegation_check(facts: Facts, target: str, policy: CompiledPolicy) -> Delegation | None:
    """A call at hop 2 or deeper, judged against the chain's root caller: may the root reach
    `target` (the call's target, or a stand-in for it)? A rule with `via` whose agents cover
    every agent between the root and the target decides; otherwise the matrix, as for a
    direct call from the root (its default included: under `defaultAction: deny` a chain
    reaches only targets a rule lets its root reach). None for a first call, and for a call
    back to the root (a loop, judged as one)."""
    chain = facts.chain
    if len(chain) < 2 or chain[0] == target:
        return None
    root = chain[0]
    if policy.grants:
        rule = policy.delegation_rule(root, target, chain[1:], facts.kind, facts.skill)
        if rule is not None:
            why = f"matrix rule {rule.caller} -> {rule.target} via {', '.join(rule.via)}"
            return Delegation(rule.action, why, granted=True)
    if not policy.may_deny(root, target):
        return _NOT_DENIED
    action, why = policy.matrix_action(root, target, facts.kind, facts.skill)
    return Delegation(action, why, granted=False)


def _beyond_initiator(facts: Facts, delegation: Delegation) -> Decision:
    root, via = facts.chain[0], " -> ".join(facts.chain[1:])
    return _reject(
        "delegation_exceeds_initiator",
        f"{root} -> {facts.target} is denied by {delegation.why}, so {via} may not call "
        f"{facts.target} for {root} (chain {' -> '.join((*facts.chain, facts.target))}); "
        f"a rule {root} -> {facts.target} via {via.replace(' -> ', ', ')} would grant it",
    )


@dataclass(frozen=True, slots=True)
class StandIn:
    """The agent a redirect rule sends a message to instead of its target, and why it."""

    slug: str
    # The matrix's action for caller -> slug: "allow", or "approve" (a human decides).
    action: str
    matrix: str  # the rule (or default) that gives `action`
    why: str


def _can_stand_in(name: str, facts: Facts, ctx: Context, policy: CompiledPolicy) -> bool:
    candidate = ctx.agents.get(name)
    if (
        candidate is None
        or name in (facts.target, facts.caller)
        or name in facts.chain
        or why_unavailable(candidate, ctx.breakers.get(name, CLOSED)) is not None
    ):
        return False
    # A delegated call goes only to a stand-in its root caller may reach.
    delegation = delegation_check(facts, name, policy)
    return delegation is None or delegation.action != "deny"


def stand_in(facts: Facts, ctx: Context, policy: CompiledPolicy, why: str) -> StandIn | None:
    """Where the redirect rules for an unavailable target send the message, if anywhere: an
    agent a rule names, if the matrix does not deny the caller it; else, for a rule naming
    none, an agent with the message's skill that a matrix rule (not the default) lets the
    caller reach."""
    for rule in policy.redirect_rules(facts.target, why):
        for name in rule.to:
            if not _can_stand_in(name, facts, ctx, policy):
                continue
            action, matrix = policy.matrix_action(facts.caller, name, facts.kind, facts.skill)
            if action != "deny":
                reason = f"named by the redirect rule for {facts.target}"
                return StandIn(name, action, matrix, reason)
        if rule.to or not facts.skill:
            continue
        for name in ctx.by_skill.get(facts.skill, ()):
            if not _can_stand_in(name, facts, ctx, policy):
                continue
            found = policy.matrix_rule(facts.caller, name, facts.kind, facts.skill)
            if found is not None and found.action != "deny":
                matrix = f"matrix rule {found.caller} -> {found.target}"
                reason = f"shares skill {facts.skill!r} and {matrix} lets {facts.caller} reach it"
                return StandIn(name, found.action, matrix, reason)
    return None


# What a matrix "approve" rule holds a message under: this, named after the rule. Validated
# once here and copied, because `model_construct` costs about 0.7 ms (pydantic reads each
# default factory's signature on every call) where a copy costs 5 us: `bench/decide.py`'s
# p99 (a third of its messages held) 0.8 and 4.3 ms made each time, 31 us copied.
_MATRIX_APPROVAL = ApprovalRule(name="a matrix approve rule", callers=[ANY])


def _matrix_approval(matrix: str, caller: str) -> ApprovalRule:
    """A matrix "approve" rule as an approval rule. Not validated: its name, which names the
    rule and so two agents, may be longer than an admin may name an approval rule."""
    return _MATRIX_APPROVAL.model_copy(
        update={"name": f"{matrix} needs approval", "callers": [caller]}
    )


def _content(facts: Facts, policy: CompiledPolicy) -> tuple[Decision | None, tuple[Finding, ...]]:
    """The content step (7b): a refusal or a hold when a content rule says so, and the
    findings to mask either way."""
    if not facts.content:
        return None, ()
    verdict = content_verdict(
        facts.content,
        policy.content,
        direction="request",
        caller=facts.caller,
        target=facts.target,
        kind=facts.kind,
        skill=facts.skill,
    )
    if verdict.action == "reject":
        detail = f"content rule {verdict.rule!r} found {verdict.kind}"
        if verdict.reason:
            detail = f"{detail}: {verdict.reason}"
        return Decision("reject", "content_rejected", detail, content=verdict.findings), ()
    if verdict.action == "hold":
        detail = f"content rule {verdict.rule!r} found {verdict.kind}"
        held = Decision("hold", "content_held", detail, facts.target, content=verdict.findings)
        return held, ()
    return None, verdict.findings


def decide(facts: Facts, ctx: Context, policy: CompiledPolicy) -> Decision:
    """Judge one message. See the module docstring for the checks and their order."""
    rules = policy.policy
    if not rules.routing_enabled:
        return _reject("routing_disabled", "routing through the hub is switched off")
    caller = ctx.agents.get(facts.caller)
    if caller is not None and caller.status == "suspended":
        return _reject("caller_suspended", f"{facts.caller} is suspended")
    target = ctx.agents.get(facts.target)
    if target is None:
        return _reject("unknown_target", f"no agent {facts.target!r} is registered")
    if facts.caller == facts.target:
        return _reject("self_routing", f"{facts.caller} cannot send messages to itself")

    action, why = policy.matrix_action(facts.caller, facts.target, facts.kind, facts.skill)
    if action == "deny":
        return _reject("denied_by_matrix", f"{facts.caller} -> {facts.target} is denied by {why}")
    delegation = delegation_check(facts, facts.target, policy)
    if delegation is not None:
        if delegation.action == "deny":
            return _beyond_initiator(facts, delegation)
        if delegation.granted and delegation.action == "approve" and action == "allow":
            # A grant that asks for a human: held as a matrix "approve" rule holds.
            action, why = "approve", delegation.why

    if facts.hop > rules.max_hops:
        return _reject(
            "hop_limit",
            f"this call would be hop {facts.hop} of a delegation chain (limit {rules.max_hops})",
        )
    if rules.loop_detection and facts.target in facts.chain:
        path = " -> ".join((*facts.chain, facts.target))
        return _reject("loop_detected", f"{facts.target} is already on this chain: {path}")
    stopped, redacted = _content(facts, policy)
    if stopped is not None:
        return stopped

    target_limits = policy.limits_for(facts.target)
    limited = _rate_limit(facts, ctx.usage, policy.limits_for(facts.caller), target_limits)
    if limited is not None:
        return limited
    queue = target_limits.inbox_queue
    if target.inbox and queue is not None and ctx.usage.target_queue >= queue:
        return _reject(
            "queue_full",
            f"{facts.target} has {ctx.usage.target_queue} deliveries waiting (queue size {queue})",
            QUEUE_RETRY_SECONDS,
        )

    breaker = ctx.breakers.get(facts.target, CLOSED) if rules.breaker.enabled else CLOSED
    unavailable = why_unavailable(target, breaker)
    if unavailable is not None:
        why_not, detail, retry_after = unavailable
        other = stand_in(facts, ctx, policy, why_not) if facts.new_task else None
        if other is None:
            reason = "circuit_open" if why_not == "circuit_open" else f"target_{why_not}"
            return _reject(reason, detail, retry_after)
        approval = (
            _matrix_approval(other.matrix, facts.caller)
            if other.action == "approve"
            else policy.approval_for(replace(facts, target=other.slug))
        )
        if approval is not None:
            return Decision(
                "hold",
                "approval_required",
                f"{detail}; to be redirected to {other.slug} ({other.why}): {approval.name}",
                other.slug,
                approval=approval,
                content=redacted,
            )
        return Decision(
            "redirect",
            "redirected",
            f"{detail}; redirected to {other.slug} ({other.why})",
            other.slug,
            content=redacted,
        )

    if facts.new_task:
        if action == "approve":
            rule = _matrix_approval(why, facts.caller)
            return Decision(
                "hold",
                "approval_required",
                rule.name,
                facts.target,
                approval=rule,
                content=redacted,
            )
        approval = policy.approval_for(facts)
        if approval is not None:
            return Decision(
                "hold",
                "approval_required",
                approval.name,
                facts.target,
                approval=approval,
                content=redacted,
            )
    probe = breaker.state == "half_open" and breaker.probe_available
    if redacted:
        detail = ", ".join(sorted({f"{f.kind} by {f.rule!r}" for f in redacted}))
        return Decision(
            "deliver",
            "content_redacted",
            f"redacted {detail}",
            facts.target,
            probe=probe,
            content=redacted,
        )
    return Decision("deliver", "ok", target=facts.target, probe=probe)
