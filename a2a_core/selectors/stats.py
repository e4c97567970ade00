"""Reads for the overview: the hub's traffic at a glance.

Every read of the message table is bounded to the last hour (the `msg_created` index gives the
range) and grouped in the database by time bucket, so what comes back is a few hundred small
rows however busy the hour was. Two queries read messages; three more read the small tables
(agents, escalations) and the breakers' shared state.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import Count, Exists, Func, IntegerField, OuterRef
from django.utils import timezone

from a2a_core.models import (
    ACTIVE_STATES,
    Agent,
    AgentStatus,
    Decision,
    Direction,
    Escalation,
    EscalationStatus,
    Message,
    Task,
)
from a2a_core.policy import clock
from a2a_core.storage.policy_state import policy_state

HOUR = 3600
# Messages per minute: one point per minute over the last RATE_MINUTES.
RATE_MINUTES = 30
# Latency percentiles: one point per LATENCY_BUCKET seconds over the hour.
LATENCY_BUCKET = 300
TOP_REASONS = 5


class TimeBucket(Func):
    """Which `seconds`-wide bucket after `start` (0, 1, ...) a datetime column falls in.

    Computed from whole epoch seconds, natively on both databases: Django's Trunc and Extract
    call back into Python for every row on SQLite, which a busy hour cannot afford.
    """

    output_field = IntegerField()
    arity = 1

    def __init__(self, expression: str, *, start: datetime, seconds: int) -> None:
        super().__init__(expression, start=start, seconds=seconds)
        self.start = int(start.timestamp())
        self.seconds = seconds

    def as_sqlite(
        self, compiler: Any, connection: Any, **extra: Any
    ) -> tuple[str, tuple[Any, ...]]:
        column, params = compiler.compile(self.source_expressions[0])
        # `%%` is how a literal `%` reaches SQLite through Django's parameter conversion.
        sql = f"((CAST(strftime('%%s', {column}) AS INTEGER) - %s) / %s)"
        return sql, (*params, self.start, self.seconds)

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> tuple[str, list[Any]]:
        column, params = compiler.compile(self.source_expressions[0])
        sql = f"CAST(FLOOR((EXTRACT(EPOCH FROM {column}) - %s) / %s) AS INTEGER)"
        return sql, [*params, self.start, self.seconds]


@dataclass(frozen=True)
class Latency:
    """Response latency percentiles (ms) of answered requests; None when there were none."""

    p50: int | None
    p95: int | None
    answered: int


@dataclass(frozen=True)
class OpenBreaker:
    target: str
    state: str  # open | half_open
    failures: int
    # When an open breaker lets a trial call through.
    retry_at: datetime | None


@dataclass(frozen=True)
class Overview:
    at: datetime
    # Messages per minute, oldest first; the last is the 60 seconds up to `at`.
    per_minute: list[int]
    messages_hour: int
    # Every decision (deliver, hold, redirect, reject) -> messages in the last hour.
    decisions: dict[str, int]
    # The most frequent rejection reasons in the last hour, most first.
    rejections: list[tuple[str, int]]
    latency: Latency
    # Per LATENCY_BUCKET over the hour, oldest first.
    latency_buckets: list[Latency]
    breakers: list[OpenBreaker]
    escalations_pending: int
    # Agents by what they are doing: idle, busy, offline, suspended.
    agents: dict[str, int]

    @property
    def last_minute(self) -> int:
        return self.per_minute[-1]

    @property
    def agents_online(self) -> int:
        return self.agents[AgentStatus.IDLE] + self.agents[AgentStatus.BUSY]


def percentile(histogram: Iterable[tuple[int, int]], pct: float) -> int | None:
    """The nearest-rank percentile of (value, count) pairs: the smallest value at or below
    which at least `pct` percent of the samples lie."""
    pairs = sorted(histogram)
    total = sum(count for _, count in pairs)
    if not total:
        return None
    rank = max(1, math.ceil(pct / 100 * total))
    seen = 0
    for value, count in pairs:
        seen += count
        if seen >= rank:
            return value
    return pairs[-1][0]


def _latency(histogram: Counter[int]) -> Latency:
    pairs = list(histogram.items())
    return Latency(percentile(pairs, 50), percentile(pairs, 95), histogram.total())


def overview_stats(*, now: datetime | None = None) -> Overview:
    """The last hour of traffic, the breakers, escalations and agents, as of `now`.

    Buckets end at the whole second after `now`, so the last minute is a full minute (no dip
    at the end of the line) and every row counted falls in exactly one bucket.
    """
    now = now or timezone.now()
    end = now.replace(microsecond=0) + timedelta(seconds=1)
    start = end - timedelta(seconds=HOUR)
    hour = Message.objects.filter(created_at__gte=start, created_at__lt=end).order_by()

    minutes = [0] * (HOUR // 60)
    decisions = dict.fromkeys(Decision.values, 0)
    reasons: Counter[str] = Counter()
    for minute, decision, reason, count in (
        hour.annotate(minute=TimeBucket("created_at", start=start, seconds=60))
        .values_list("minute", "decision", "decision_reason")
        .annotate(n=Count("pk"))
    ):
        minutes[min(max(minute, 0), len(minutes) - 1)] += count
        decisions[decision] = decisions.get(decision, 0) + count
        if decision == Decision.REJECT:
            reasons[reason or "unknown"] += count

    buckets = [Counter[int]() for _ in range(HOUR // LATENCY_BUCKET)]
    for bucket, latency_ms, count in (
        hour.filter(direction=Direction.REQUEST, latency_ms__isnull=False)
        .annotate(bucket=TimeBucket("created_at", start=start, seconds=LATENCY_BUCKET))
        .values_list("bucket", "latency_ms")
        .annotate(n=Count("pk"))
    ):
        buckets[min(max(bucket, 0), len(buckets) - 1)][latency_ms] += count

    return Overview(
        at=now,
        per_minute=minutes[-RATE_MINUTES:],
        messages_hour=sum(minutes),
        decisions=decisions,
        rejections=reasons.most_common(TOP_REASONS),
        latency=_latency(sum(buckets, Counter[int]())),
        latency_buckets=[_latency(bucket) for bucket in buckets],
        breakers=open_breakers(),
        escalations_pending=Escalation.objects.filter(status=EscalationStatus.PENDING).count(),
        agents=agent_counts(),
    )


def open_breakers() -> list[OpenBreaker]:
    """Circuit breakers that are open or half-open, by target (from the policy's shared state)."""
    moment = clock.now()
    found = []
    for target, view in sorted(policy_state().tripped(moment).items()):
        if view.state == "closed":
            continue
        retry_at = None
        if view.state == "open":
            retry_at = datetime.fromtimestamp(moment + view.retry_after, tz=UTC)
        found.append(OpenBreaker(target, view.state, view.failures, retry_at))
    return found


def agent_counts() -> dict[str, int]:
    """How many agents are idle, busy (online with work in flight), offline and suspended."""
    counts = dict.fromkeys(["idle", "busy", "offline", "suspended"], 0)
    busy = Exists(Task.objects.filter(target=OuterRef("pk"), state__in=list(ACTIVE_STATES)))
    for status, working, count in (
        Agent.objects.annotate(busy=busy)
        .values_list("status", "busy")
        .annotate(n=Count("pk"))
        .order_by()
    ):
        if status == AgentStatus.ONLINE:
            status = AgentStatus.BUSY if working else AgentStatus.IDLE
        counts[status] = counts.get(status, 0) + count
    return counts
