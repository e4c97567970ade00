"""Prometheus metrics, and the "A2A call completed" log line of each call.

Counters and the duration histogram are updated as calls finish. The gauges (breakers, the
delivery queue, pending escalations) describe shared state, so they are read from it when
`/metrics` is scraped, not kept per process. With several server processes set
`PROMETHEUS_MULTIPROC_DIR` (`a2a serve --workers N` does) and every process's counters are
summed in each scrape.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from a2a.types.a2a_pb2 import Message, StreamResponse, Task, TaskStatusUpdateEvent
from a2a.types.a2a_pb2 import TaskState as WireState
from a2a.utils import errors as sdk_errors
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from a2a_core.logging import get_logger
from a2a_core.models import (
    Agent,
    Delivery,
    DeliveryMode,
    DeliveryState,
    Escalation,
    EscalationStatus,
)
from a2a_core.models import Message as MessageRow
from a2a_core.policy import clock
from a2a_core.storage.policy_state import policy_state

log = get_logger("calls")

CALLS = Counter(
    "a2a_calls",
    "Messages sent to agents through the hub, by how the call ended",
    ["caller", "target", "skill", "status"],
)
DURATION = Histogram(
    "a2a_call_duration_seconds",
    "Time from receiving a message to answering its caller",
    ["caller", "target", "skill"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
)
CALL_QUEUE = Gauge(
    "a2a_call_queue_size",
    "Calls waiting in the hub for one of their target's slots (policy limits.incomingConcurrent)",
    ["target"],
    multiprocess_mode="livesum",
)
DECISIONS = Counter(
    "a2a_policy_decisions",
    "The policy's decisions on messages, by decision and reason",
    ["decision", "reason"],
)
CONTENT = Counter(
    "a2a_content_findings",
    "What the policy's content rules found, by direction (request or answer), kind "
    "(secret, card, iban, email, phone, or a pattern rule's name) and the action taken",
    ["direction", "kind", "action"],
)

# a2a_circuit_breaker_state values
BREAKER_VALUES = {"closed": 0, "half_open": 1, "open": 2}

CONTENT_TYPE = CONTENT_TYPE_LATEST


def decided(decision: str, reason: str) -> None:
    DECISIONS.labels(decision, reason).inc()


def content_found(direction: str, action: str, kinds: Iterable[str]) -> None:
    """Count a message's or an answer's findings (one per finding), under the action the
    content rules took on it."""
    for kind in kinds:
        CONTENT.labels(direction, kind, action).inc()


def status_of(result: Any) -> str:
    """A call's status label: the task's state (`completed`, `auth_required`...), `message`
    for a direct answer."""
    if isinstance(result, Message):
        return "message"
    if isinstance(result, StreamResponse):
        result = getattr(result, result.WhichOneof("payload") or "task")
    if isinstance(result, Task | TaskStatusUpdateEvent):
        return WireState.Name(result.status.state).removeprefix("TASK_STATE_").lower()
    return ""


def error_status(exc: BaseException) -> str:
    """A failed call's status label: the A2A error's reason (`rate_limited`...)."""
    if not isinstance(exc, sdk_errors.A2AError):
        return "error"
    reason = sdk_errors.A2A_ERROR_REASONS.get(type(exc))
    return reason.lower() if reason else "error"


@dataclass
class CallRecord:
    """One call being served; `finish` counts it, times it and logs it."""

    caller: str
    target: str
    method: str
    started: float = field(default_factory=time.perf_counter)
    status: str = ""
    # Learned while serving it (see `a2a_core.delivery.call.Call.learned`).
    learned: dict[str, str] = field(default_factory=dict)

    def saw(self, item: Any) -> None:
        self.status = status_of(item) or self.status

    def failed(self, exc: BaseException) -> None:
        self.status = error_status(exc)

    def finish(self) -> None:
        elapsed = time.perf_counter() - self.started
        skill = self.learned.get("skill", "")
        status = self.status or "unknown"
        CALLS.labels(self.caller, self.target, skill, status).inc()
        DURATION.labels(self.caller, self.target, skill).observe(elapsed)
        log.info(
            "A2A call completed",
            extra={
                "method": self.method,
                "call_id": self.learned.get("task_id", ""),
                "caller_agent_id": self.caller,
                "target_agent_id": self.target,
                "skill": skill,
                "status": status,
                "duration_ms": round(elapsed * 1000, 1),
                "trace_id": self.learned.get("trace_id", ""),
            },
        )


# --- the scrape -----------------------------------------------------------------------------


@dataclass(frozen=True)
class SharedGauges:
    breakers: Mapping[str, str]
    queue_size: int
    escalations_pending: int


def shared_gauges() -> SharedGauges:
    """Read the gauges from the shared state (sync: on the database thread)."""
    targets = Agent.objects.filter(delivery_mode=DeliveryMode.ENDPOINT).values_list(
        "slug", flat=True
    )
    tripped = policy_state().tripped(clock.now())
    breakers = {slug: tripped[slug].state if slug in tripped else "closed" for slug in targets}
    waiting = (DeliveryState.QUEUED, DeliveryState.PENDING)
    queue = MessageRow.objects.filter(delivery_state=DeliveryState.QUEUED).count()
    queue += Delivery.objects.filter(state__in=waiting).count()
    pending = Escalation.objects.filter(status=EscalationStatus.PENDING).count()
    return SharedGauges(breakers, queue, pending)


class _Shared(Collector):
    def __init__(self, gauges: SharedGauges) -> None:
        self.gauges = gauges

    def collect(self) -> Iterator[GaugeMetricFamily]:
        breaker = GaugeMetricFamily(
            "a2a_circuit_breaker_state",
            "Each endpoint agent's circuit breaker: 0 closed, 1 half-open, 2 open",
            labels=["target"],
        )
        for slug, state in sorted(self.gauges.breakers.items()):
            breaker.add_metric([slug], BREAKER_VALUES.get(state, 0))
        yield breaker
        yield GaugeMetricFamily(
            "a2a_queue_size",
            "Messages waiting for delivery (queued for an agent, or approved and not yet sent)",
            value=self.gauges.queue_size,
        )
        yield GaugeMetricFamily(
            "a2a_escalations_pending",
            "Messages held for a human who has not decided yet",
            value=self.gauges.escalations_pending,
        )


def exposition(gauges: SharedGauges) -> bytes:
    """The Prometheus text exposition: this process's (or every process's) counters and
    histograms, then the shared gauges."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    else:
        registry = REGISTRY
    shared = CollectorRegistry(auto_describe=False)
    shared.register(_Shared(gauges))
    return generate_latest(registry) + generate_latest(shared)
