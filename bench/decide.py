"""Latency of the policy's pure `decide`: p50/p99 over many decisions.

    python bench/decide.py [--decisions 100000] [--agents 1000] [--rules 10000] [--seed 7]

Builds a policy with `--rules` matrix rules (allow/deny/approve, some per kind or skill) among
`--agents` agents, validates and compiles it, then times each of `--decisions` calls of
`decide` on random messages (random pairs, kinds, skills, chains, usage and breakers). The same
messages are then judged by the default policy (no matrix rules) as the baseline, in the same
process. Target: p99 under 50 microseconds with 1,000 agents and 10,000 rules.
"""

from __future__ import annotations

import argparse
import gc
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from a2a_core.policy.compiled import CompiledPolicy
from a2a_core.policy.decide import (
    AgentState,
    BreakerView,
    Context,
    Facts,
    Usage,
    decide,
)
from a2a_core.schemas.policy import default_policy, parse_policy

KINDS = ["request", "question", "review_request", "status_update", "knowledge_share", "escalation"]
SKILLS = [f"skill-{i}" for i in range(40)]


def build_policy(slugs: list[str], rules: int, rng: random.Random) -> dict[str, object]:
    seen: set[tuple[str, str]] = set()
    matrix = []
    while len(matrix) < rules:
        caller = rng.choice(slugs) if rng.random() > 0.05 else "*"
        target = rng.choice(slugs) if rng.random() > 0.05 else "*"
        if (caller, target) in seen:
            continue
        seen.add((caller, target))
        rule: dict[str, object] = {
            "caller": caller,
            "target": target,
            "action": rng.choices(["allow", "deny", "approve"], weights=[6, 3, 1])[0],
        }
        if rng.random() < 0.2:
            rule["kinds"] = rng.sample(KINDS, 2)
        if rng.random() < 0.1:
            rule["skills"] = rng.sample(SKILLS, 3)
        matrix.append(rule)
    return {
        "matrix": matrix,
        "limits": {"perMinute": 600, "perHour": 20000, "concurrent": 50},
        "agentLimits": {slug: {"perMinute": 100} for slug in slugs[:100]},
        "approvals": [
            {"name": "escalations need a human", "kinds": ["escalation"]},
            {"name": "urgent reviews", "kinds": ["review_request"], "priorities": ["urgent"]},
            {"name": "payments", "skills": ["skill-7"]},
        ],
    }


def messages(
    slugs: list[str], count: int, rng: random.Random
) -> list[tuple[Facts, Usage, dict[str, BreakerView]]]:
    out = []
    for _ in range(count):
        caller, target = rng.sample(slugs, 2)
        chain = (*rng.sample(slugs, rng.randint(0, 3)), caller)
        facts = Facts(
            caller=caller,
            target=target,
            kind=rng.choice(KINDS),
            skill=rng.choice(SKILLS),
            priority=rng.choice(["low", "normal", "high", "urgent"]),
            chain=chain,
            new_task=rng.random() < 0.8,
        )
        usage = Usage(
            minute=rng.randint(0, 650), hour=rng.randint(0, 5000), inflight=rng.randint(0, 55)
        )
        breakers = {target: BreakerView("open", 10.0)} if rng.random() < 0.02 else {}
        out.append((facts, usage, breakers))
    return out


def timed(
    policy: CompiledPolicy,
    agents: dict[str, AgentState],
    by_skill: dict[str, tuple[str, ...]],
    batch: list[tuple[Facts, Usage, dict[str, BreakerView]]],
) -> tuple[list[float], dict[str, int]]:
    samples: list[float] = []
    outcomes: dict[str, int] = {}
    clock = time.perf_counter_ns
    gc.disable()
    try:
        for facts, usage, breakers in batch:
            context = Context(agents=agents, usage=usage, breakers=breakers, by_skill=by_skill)
            started = clock()
            decision = decide(facts, context, policy)
            samples.append((clock() - started) / 1000)
            outcomes[decision.action] = outcomes.get(decision.action, 0) + 1
    finally:
        gc.enable()
    return samples, outcomes


def pct(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))]


def report(label: str, samples: list[float], outcomes: dict[str, int]) -> None:
    mix = ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
    print(
        f"{label:<22} p50 {pct(samples, 50):6.2f} us   p99 {pct(samples, 99):6.2f} us   "
        f"p99.9 {pct(samples, 99.9):6.2f} us   max {max(samples):8.1f} us   ({mix})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--decisions", type=int, default=100_000)
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--rules", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)

    slugs = [f"agent-{i:04d}" for i in range(args.agents)]
    agents = {
        slug: AgentState(
            slug,
            rng.choices(["online", "suspended", "offline"], weights=[95, 3, 2])[0],
            inbox=rng.random() < 0.3,
            skills=frozenset(rng.sample(SKILLS, 3)),
        )
        for slug in slugs
    }
    by_skill: dict[str, tuple[str, ...]] = {}
    for state in agents.values():
        for skill in state.skills:
            by_skill[skill] = (*by_skill.get(skill, ()), state.slug)

    document = build_policy(slugs, args.rules, rng)
    started = time.perf_counter()
    policy = CompiledPolicy(parse_policy(document), version=1)
    compile_ms = (time.perf_counter() - started) * 1000
    baseline = CompiledPolicy(default_policy())
    batch = messages(slugs, args.decisions, rng)
    print(
        f"decide(): {args.decisions:,} decisions, {args.agents:,} agents, "
        f"{args.rules:,} matrix rules (validated and compiled in {compile_ms:.0f} ms)"
    )

    timed(policy, agents, by_skill, batch[:5000])  # warm up
    with_rules, outcomes = timed(policy, agents, by_skill, batch)
    without_rules, base_outcomes = timed(baseline, agents, by_skill, batch)
    report(f"{args.rules:,} rules", with_rules, outcomes)
    report("baseline (no rules)", without_rules, base_outcomes)
    p99 = pct(with_rules, 99)
    print(
        f"ratio p99 rules/baseline: {p99 / pct(without_rules, 99):.2f}x; "
        f"target p99 < 50 us -> {'met' if p99 < 50 else 'NOT met'} ({p99:.2f} us)"
    )


if __name__ == "__main__":
    main()
