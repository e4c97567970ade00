"""Applying the policy to a batch of messages: gather the state once, decide each message,
count what passes.

Runs inside the transaction that records the messages. `decide` stays pure: everything it
reads comes from here. A message that passes is counted atomically in the shared windows
(`WindowCounts.reserve`; with Redis, the messages that can pass are counted by the same
round trip that reads the windows and breakers); when a concurrent worker got there first,
the message is judged again with the new counts and refused. Messages earlier in the batch
count for later ones.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from a2a_core import agent_cache
from a2a_core.models import (
    ACTIVE_STATE_LIST,
    WAITING_STATES,
    Agent,
    AgentStatus,
    Delivery,
    DeliveryMode,
    Skill,
    Task,
)
from a2a_core.policy import clock
from a2a_core.policy.compiled import CompiledPolicy
from a2a_core.policy.content import Hit, content_scan
from a2a_core.policy.decide import (
    CLOSED,
    AgentState,
    BreakerView,
    Context,
    Decision,
    Facts,
    Usage,
    decide,
    why_unavailable,
)
from a2a_core.policy.wording import decided_by_policy
from a2a_core.services.policy import current_policy
from a2a_core.storage.policy_state import Ask, PolicyState, WindowCounts, Windows, policy_state
from a2a_core.storage.reads import count_by

# How long a half-open breaker's trial call holds the probe before another may try.
PROBE_HOLD_SECONDS = 30.0


@dataclass(frozen=True)
class Decided:
    decision: Decision
    latency_us: int
    policy_version: int
    # The target's breaker has something to forget or count: report how the call went.
    watch_breaker: bool = False
    # Who stands behind the decision: "policy v3 by alice" (`decided_by_policy`).
    decided_by: str = ""


def agent_state(agent: Agent, skills: Sequence[str] | None = None) -> AgentState:
    if skills is None:
        skills = getattr(agent, "skill_ids", None)
    if skills is None:
        skills = tuple(agent.skills.values_list("skill_id", flat=True))
    status = (
        agent.status if agent.status in (AgentStatus.SUSPENDED, AgentStatus.OFFLINE) else "online"
    )
    return AgentState(
        agent.slug, status, agent.delivery_mode == DeliveryMode.INBOX, frozenset(skills)
    )


@dataclass
class _Known:
    """What `decide` may read about agents, gathered before it runs (it reads nothing
    itself): the batch's callers and targets, and for a target that cannot take a message
    now, the agents its redirect rules name and those sharing the message's skill."""

    agents: dict[str, AgentState | None]
    by_skill: dict[str, tuple[str, ...]]

    def context(self, **fields: Any) -> Context:
        known = {slug: state for slug, state in self.agents.items() if state is not None}
        return Context(agents=known, by_skill=self.by_skill, **fields)

    def load(self, slugs: set[str]) -> None:
        for slug in slugs - self.agents.keys():
            agent = agent_cache.agent_by_slug(slug)
            self.agents[slug] = agent_state(agent) if agent is not None else None

    def gather(
        self,
        facts: Sequence[Facts],
        policy: CompiledPolicy,
        breakers: Mapping[str, BreakerView],
    ) -> _Known:
        self.load({f.caller for f in facts} | {f.target for f in facts})
        names: set[str] = set()
        skills: set[str] = set()
        for fact in facts:
            target = self.agents.get(fact.target)
            unavailable = target and why_unavailable(target, breakers.get(fact.target, CLOSED))
            if not unavailable:
                continue
            for rule in policy.redirect_rules(fact.target, unavailable[0]):
                names.update(rule.to)
                if not rule.to and fact.skill:
                    skills.add(fact.skill)
        self._load_skills(skills - self.by_skill.keys())
        self.load(names | {name for skill in skills for name in self.by_skill[skill]})
        return self

    def _load_skills(self, skills: set[str]) -> None:
        if not skills:
            return
        found: dict[str, list[str]] = {skill: [] for skill in skills}
        for skill, slug in (
            Skill.objects.filter(skill_id__in=skills)
            .order_by("skill_id", "agent__slug")
            .values_list("skill_id", "agent__slug")
        ):
            if len(found[skill]) < MAX_SKILL_SHARERS:
                found[skill].append(slug)
        self.by_skill.update({skill: tuple(slugs) for skill, slugs in found.items()})


def message_content(
    message: Mapping[str, Any], *, caller: str, target: str, kind: str, skill: str
) -> tuple[Hit, ...]:
    """What the detectors of the content rules that apply to this request find in it: the
    `content` of its Facts (the scan is pure and runs before `decide`, which stays cheap)."""
    return content_scan(
        message,
        current_policy().content,
        direction="request",
        caller=caller,
        target=target,
        kind=kind,
        skill=skill,
    )


# Redirect candidates considered per skill (the first by agent id, alphabetically).
MAX_SKILL_SHARERS = 50


def decide_batch(facts: Sequence[Facts], callers: Sequence[int]) -> list[Decided]:
    """Decide each message, in order; `callers[i]` is the pk of `facts[i].caller`."""
    policy = current_policy()
    state = policy_state()
    now = clock.now()
    windows = [Windows.at(now, f.caller, f.target) for f in facts]
    inflight = count_by(
        Task,
        "caller_id",
        {pk for pk, f in zip(callers, facts, strict=True) if f.new_task},
        ACTIVE_STATE_LIST,
    )
    queues = _queues(facts)
    known = _Known({}, {}).gather(facts, policy, {})
    asks = _asks(facts, windows, callers, policy, known.context(), inflight, queues)
    counts, breakers = state.gather(asks, now, breakers=policy.policy.breaker.enabled)
    known.gather(facts, policy, breakers)

    decided_by = decided_by_policy(policy.version, policy.author)
    judged = []
    for i, (fact, window, caller_pk) in enumerate(zip(facts, windows, callers, strict=True)):
        started = time.perf_counter_ns()
        usage = _usage(counts, window, inflight.get(caller_pk, 0), queues.get(fact.target, 0))
        context = known.context(usage=usage, breakers=breakers)
        decision = decide(fact, context, policy)
        latency = (time.perf_counter_ns() - started) // 1000
        if decision.action != "reject":
            decision = _count(
                state, policy, fact, decision, context, now, counts, inflight, caller_pk, i
            )
        target = decision.target or fact.target
        if decision.delivers and target in queues:
            queues[target] += 1
        watch = target in breakers
        judged.append(Decided(decision, latency, policy.version, watch, decided_by))
    counts.save()
    return judged


def _asks(
    facts: Sequence[Facts],
    windows: Sequence[Windows],
    callers: Sequence[int],
    policy: CompiledPolicy,
    context: Context,
    inflight: Mapping[int, int],
    queues: Mapping[str, int],
) -> list[Ask]:
    """The batch's messages for `PolicyState.gather`, each marked to be counted at once when
    it passes every check that does not depend on the shared windows and breakers (judged
    as if they were empty and closed). The guess errs towards not counting: a message it
    leaves out that passes after all is counted on its own."""
    inflight, queues = dict(inflight), dict(queues)
    asks = []
    for fact, window, caller_pk in zip(facts, windows, callers, strict=True):
        usage = Usage(inflight=inflight.get(caller_pk, 0), target_queue=queues.get(fact.target, 0))
        guess = decide(fact, replace(context, usage=usage), policy)
        passes = guess.action != "reject" and guess.target == fact.target
        if passes and fact.new_task and guess.action != "hold":
            inflight[caller_pk] = inflight.get(caller_pk, 0) + 1
        if passes and guess.delivers and fact.target in queues:
            queues[fact.target] += 1
        limits, target_limits = policy.limits_for(fact.caller), policy.limits_for(fact.target)
        asks.append(Ask(window, limits, target_limits, fact.target, passes))
    return asks


def _queues(facts: Sequence[Facts]) -> dict[str, int]:
    """Deliveries waiting for each inbox agent the batch addresses, by slug."""
    inbox = {}
    for fact in facts:
        agent = agent_cache.agent_by_slug(fact.target)
        if agent is not None and agent.delivery_mode == DeliveryMode.INBOX:
            inbox[agent.pk] = agent.slug
    waiting = count_by(Delivery, "recipient_id", set(inbox), WAITING_STATES)
    return {slug: waiting.get(pk, 0) for pk, slug in inbox.items()}


def _usage(counts: WindowCounts, window: Windows, inflight: int, queue: int = 0) -> Usage:
    return Usage(
        minute=counts.get(window.caller_minute),
        hour=counts.get(window.caller_hour),
        inflight=inflight,
        target_minute=counts.get(window.target_minute),
        target_queue=queue,
        minute_resets_in=window.minute_resets_in,
        hour_resets_in=window.hour_resets_in,
    )


def _count(
    state: PolicyState,
    policy: CompiledPolicy,
    fact: Facts,
    decision: Decision,
    context: Context,
    now: float,
    counts: WindowCounts,
    inflight: dict[int, int],
    caller_pk: int,
    ask: int,
) -> Decision:
    """Count a message that passed; if the windows filled up meanwhile (another worker), judge
    it again with the counts as they are now."""
    target = decision.target or fact.target
    window = Windows.at(now, fact.caller, target)
    limits, target_limits = policy.limits_for(fact.caller), policy.limits_for(target)
    if not counts.reserve(window, limits, target_limits, ask=ask):
        usage = _usage(counts, window, context.usage.inflight, context.usage.target_queue)
        again = decide(
            fact, Context(context.agents, usage, context.breakers, context.by_skill), policy
        )
        if again.action == "reject":
            return again
        return Decision(
            "reject",
            "rate_limit_incoming" if target != fact.target else "rate_limit_minute",
            "the rate limit was reached",
            retry_after=window.minute_resets_in,
        )
    if fact.new_task and decision.action != "hold":
        inflight[caller_pk] = inflight.get(caller_pk, 0) + 1
    if decision.probe and not state.claim_probe(target, now, PROBE_HOLD_SECONDS):
        return Decision(
            "reject",
            "circuit_open",
            f"{target}'s breaker is half-open and its trial call is taken",
            retry_after=1.0,
        )
    return decision
