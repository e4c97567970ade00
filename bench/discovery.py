"""Discovery by skill id or tag over 10,000 registered agents (target: under 20 ms on SQLite).

python bench/discovery.py [--agents 10000] [--queries 300]
"""

from __future__ import annotations

import argparse
import gc
import random
import time

from _setup import describe, django_with_fresh_db, percentile

SKILLS = [f"skill_{i}" for i in range(400)]
TAGS = [f"tag_{i}" for i in range(150)]


def populate(n: int, rng: random.Random) -> None:
    from django.db import transaction
    from django.utils import timezone

    from a2a_core.models import Agent, Skill, SkillTag

    now = timezone.now()
    with transaction.atomic():
        agents = Agent.objects.bulk_create(
            Agent(
                slug=f"agent-{i:05d}",
                name=f"Agent {i}",
                description=f"agent number {i}",
                card={},
                card_version="1",
                card_digest="x",
                delivery_mode="endpoint",
                status=rng.choice(["online", "offline", "suspended"]),
                scopes=["a2a:call", "a2a:receive"],
                last_seen_at=now,
            )
            for i in range(n)
        )
        skills = []
        for agent in agents:
            for skill_id in rng.sample(SKILLS, 3):
                skills.append(
                    Skill(agent=agent, skill_id=skill_id, name=skill_id, tags=rng.sample(TAGS, 3))
                )
        skills = Skill.objects.bulk_create(skills, batch_size=2000)
        SkillTag.objects.bulk_create(
            (SkillTag(skill=s, agent_id=s.agent_id, tag=t) for s in skills for t in s.tags),
            batch_size=5000,
        )


def timed(fn, queries: int, rng: random.Random, choices: list[str]) -> list[float]:
    samples = []
    for _ in range(queries):
        value = rng.choice(choices)
        start = time.perf_counter()
        page = fn(value)
        samples.append((time.perf_counter() - start) * 1000)
        assert page.agents is not None
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--agents", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()

    django_with_fresh_db("discovery")
    from django.db import connection

    from a2a_core.selectors import agent_discover

    rng = random.Random(7)
    start = time.perf_counter()
    populate(args.agents, rng)
    print(
        f"populated {args.agents} agents ({args.agents * 3} skills) in {time.perf_counter() - start:.1f}s "
        f"on {connection.vendor}"
    )

    # The 130k objects built to populate the table are garbage now; collect them once so the
    # timings measure discovery, not a full collection of setup leftovers.
    gc.collect()
    gc.freeze()
    agent_discover(skill=SKILLS[0])  # warm up connection and caches
    by_skill = timed(lambda v: agent_discover(skill=v), args.queries, rng, SKILLS)
    by_tag = timed(lambda v: agent_discover(tag=v), args.queries, rng, TAGS)
    by_both = timed(lambda v: agent_discover(tag=v, status="online"), args.queries, rng, TAGS)
    print(f"discover(skill=...)            {describe(by_skill)}")
    print(f"discover(tag=...)              {describe(by_tag)}")
    print(f"discover(tag=..., status=...)  {describe(by_both)}")
    worst = max(percentile(by_skill, 99), percentile(by_tag, 99))
    print(
        f"target: p99 under 20 ms -> {'met' if worst < 20 else 'NOT met'} (worst p99 {worst:.2f} ms)"
    )


if __name__ == "__main__":
    main()
