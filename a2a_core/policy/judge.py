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
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

from django.conf import settings
from django.db import connection
from django.db.models import Model

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
from a2a_core.policy.decide import (
    AgentState,
    CompiledPolicy,
    Context,
    Decision,
    Facts,
    Usage,
    decide,
)
from a2a_core.policy.state import Ask, PolicyState, WindowCounts, Windows, policy_state
from a2a_core.services.policy import current_policy

# How long a half-open breaker's trial call holds the probe before another may try.
PROBE_HOLD_SECONDS = 30.0


@dataclass(frozen=True)
class Judged:
    decision: Decision
    latency_us: int
    policy_version: int
    # The target's breaker has something to forget or count: report how the call went.
    watch_breaker: bool = False


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


class _Agents(Mapping[str, AgentState]):
    """Agents by slug, loaded (from the per-process cache) only when `decide` asks."""

    def __init__(self) -> None:
        self._seen: dict[str, AgentState | None] = {}

    def __getitem__(self, slug: str) -> AgentState:
        if slug not in self._seen:
            agent = agent_cache.agent_by_slug(slug)
            self._seen[slug] = agent_state(agent) if agent is not None else None
        found = self._seen[slug]
        if found is None:
            raise KeyError(slug)
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(slug for slug, state in self._seen.items() if state is not None)

    def __len__(self) -> int:
        return sum(1 for state in self._seen.values() if state is not None)


class _BySkill(Mapping[str, tuple[str, ...]]):
    """Agents with a skill (redirect candidates), looked up only for redirects."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[str, ...]] = {}

    def __getitem__(self, skill: str) -> tuple[str, ...]:
        if skill not in self._seen:
            self._seen[skill] = tuple(
                Skill.objects.filter(skill_id=skill)
                .order_by("agent__slug")
                .values_list("agent__slug", flat=True)[:50]
            )
        return self._seen[skill]

    def __iter__(self) -> Iterator[str]:
        return iter(self._seen)

    def __len__(self) -> int:
        return len(self._seen)


def _count_by(
    model: type[Model], column: str, pks: set[int], states: Sequence[str]
) -> dict[int, int]:
    """Rows of `model` in `states` per value of its foreign key `column` (in `pks`). Raw SQL:
    this runs for every batch of messages, and building it through the ORM cost more than
    running it."""
    if not pks:
        return {}
    q = connection.ops.quote_name
    key = q(column)
    marks = ", ".join(["%s"] * len(pks))
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {key}, COUNT(*) FROM {q(model._meta.db_table)} WHERE {key} IN ({marks}) "
            f"AND {q('state')} IN ({', '.join(['%s'] * len(states))}) GROUP BY {key}",
            [*sorted(pks), *states],
        )
        return dict(cursor.fetchall())


def judge(facts: Sequence[Facts], callers: Sequence[int]) -> list[Judged]:
    """Decide each message, in order; `callers[i]` is the pk of `facts[i].caller`."""
    policy = current_policy()
    if not settings.HUB_POLICY_ENABLED:
        return [
            Judged(Decision("deliver", "ok", target=f.target), 0, policy.version) for f in facts
        ]
    state = policy_state()
    now = clock.now()
    windows = [Windows.at(now, f.caller, f.target) for f in facts]
    inflight = _count_by(
        Task,
        "caller_id",
        {pk for pk, f in zip(callers, facts, strict=True) if f.new_task},
        ACTIVE_STATE_LIST,
    )
    agents, by_skill = _Agents(), _BySkill()
    queues = _queues(facts)
    asks = _asks(
        facts, windows, callers, policy, Context(agents, by_skill=by_skill), inflight, queues
    )
    counts, breakers = state.gather(asks, now, breakers=policy.policy.breaker.enabled)

    judged = []
    for i, (fact, window, caller_pk) in enumerate(zip(facts, windows, callers, strict=True)):
        started = time.perf_counter_ns()
        usage = _usage(counts, window, inflight.get(caller_pk, 0), queues.get(fact.target, 0))
        context = Context(agents=agents, usage=usage, breakers=breakers, by_skill=by_skill)
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
        judged.append(Judged(decision, latency, policy.version, watch))
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
    waiting = _count_by(Delivery, "recipient_id", set(inbox), WAITING_STATES)
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
