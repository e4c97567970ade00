"""One span of a trace opened up: what a task was asked and answered, what the hub decided on
the way, and where its time went — the hub's, the agent's, a human's.

The time split reads the points each call passed (`Message.call_times`, see
`a2a_core.call_times`) and the waits for a human (escalations). A span runs from the first
call's receipt (else the task's creation) to the task's end (else now); every microsecond of
it is in exactly one segment, so the segments add up to the span's duration. Where no point
was measured (an inbox agent's task, a hub restarted in between), the stretch says so
(`unmeasured`) instead of guessing whose it was.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from a2a_core.errors import NotFound
from a2a_core.models import (
    Artifact,
    Decision,
    Delivery,
    Direction,
    Escalation,
    Message,
    Task,
    TaskEvent,
    TaskEventKind,
)
from a2a_core.schemas.a2a import hub_metadata
from a2a_core.selectors.task_views import ArtifactView, MessageView, PartView, part_views
from a2a_core.selectors.traces import span_bounds

# Whose time a stretch is.
HUB, AGENT, HUMAN, UNMEASURED = "hub", "agent", "human", "unmeasured"
# How far back a refused first attempt of a request is looked for.
RETRY_WINDOW = timedelta(minutes=10)
EVENT_LIMIT = 200


@dataclass(frozen=True)
class Segment:
    """A stretch of a span: `who` spent it, doing `what` (µs from the span's start)."""

    who: str
    what: str
    start_us: int
    end_us: int

    @property
    def us(self) -> int:
        return self.end_us - self.start_us


@dataclass(frozen=True)
class StatusChange:
    at: datetime
    state: str
    text: str


@dataclass(frozen=True)
class DecisionView:
    """The hub's decision on one request of the task."""

    message: Message
    decision: str
    reason: str
    detail: str
    latency_us: int | None


@dataclass
class SpanDetail:
    task: Task
    start: datetime
    end: datetime | None  # None: still running
    duration_us: int
    segments: list[Segment]
    request: MessageView | None
    answer: list[PartView]  # the agent's last word: its reply or final status message
    artifacts: list[ArtifactView]
    attributes: list[tuple[str, str]]
    decisions: list[DecisionView]
    statuses: list[StatusChange]
    retries: list[Message]  # refused attempts of the same request, sent again after
    deliveries: list[Delivery]  # an inbox agent's copies, with their attempts
    totals: dict[str, int] = field(default_factory=dict)  # who -> µs


def span_detail(*, task_id: str, now: datetime | None = None) -> SpanDetail:
    """Task `task_id` as a span: its request and answer, attributes, decisions, status
    changes, retries, and its time split (`Segment`s adding up to `duration_us`). Raises
    `NotFound`."""
    task = (
        Task.objects.select_related("caller", "target", "addressed_to").filter(pk=task_id).first()
    )
    if task is None:
        raise NotFound(f"task {task_id} not found")
    messages = list(
        Message.objects.filter(task=task)
        .select_related("sender", "target", "author", "redirected_to")
        .order_by("created_at", "pk")[:EVENT_LIMIT]
    )
    requests = [m for m in messages if m.direction == Direction.REQUEST]
    escalations = list(Escalation.objects.filter(task=task).order_by("created_at"))
    start, end = span_bounds(task, requests, now=now)
    segments = time_split(
        start, end or now or timezone.now(), requests, escalations, ended=end is not None
    )
    totals = dict.fromkeys((HUB, AGENT, HUMAN, UNMEASURED), 0)
    for segment in segments:
        totals[segment.who] += segment.us
    first = requests[0] if requests else None
    return SpanDetail(
        task=task,
        start=start,
        end=end,
        duration_us=sum(totals.values()),
        segments=segments,
        request=MessageView(first, part_views(first.parts)) if first else None,
        answer=_answer(task, messages),
        artifacts=[
            ArtifactView(a, part_views(a.parts, join_text=True))
            for a in Artifact.objects.filter(task=task).order_by("created_at", "pk")
        ],
        attributes=_attributes(task, first),
        decisions=[
            DecisionView(m, m.decision, m.decision_reason, m.decision_detail, m.decision_latency_us)
            for m in requests
        ],
        statuses=[
            StatusChange(event.created_at, event.state, _status_text(event.payload))
            for event in TaskEvent.objects.filter(task=task, kind=TaskEventKind.STATUS).order_by(
                "seq"
            )[:EVENT_LIMIT]
        ],
        retries=_refused_attempts(first),
        deliveries=list(Delivery.objects.filter(task=task).select_related("recipient")),
        totals=totals,
    )


def time_split(
    start: datetime,
    end: datetime,
    requests: list[Message],
    escalations: list[Escalation],
    *,
    ended: bool = True,
) -> list[Segment]:
    """The span [start, end] cut into consecutive segments, each the hub's, the agent's, a
    human's or unmeasured: the measured stretches of each call and each wait for a human,
    clipped to the span; what lies between them is the agent's once the work was handed to
    it and until its answer came, the hub's before, and unmeasured where nothing tells."""

    def us(moment: datetime) -> int:
        return _micros(moment - start)

    total = max(0, us(end))
    stretches: list[tuple[int, int, str, str]] = []
    handed: list[tuple[int, int]] = []  # (delivered, answered) of each call
    for message in requests:
        times = message.call_times or {}
        base = us(message.created_at)
        at = {k: base + v for k, v in times.items() if isinstance(v, int)}
        judged = at.get("judged")
        latency = message.decision_latency_us or 0
        if judged is not None:
            began = judged - latency
            if "received" in at:
                stretches.append((at["received"], began, HUB, "accepted"))
            stretches.append((began, judged, HUB, "judged"))
            if "committed" in at:
                stretches.append((judged, at["committed"], HUB, "committed"))
        if "delivered" in at:
            before = at.get("committed")
            if before is not None:
                stretches.append((before, at["delivered"], HUB, "delivered"))
            if "answered" in at:
                stretches.append((at["delivered"], at["answered"], AGENT, "working"))
                handed.append((at["delivered"], at["answered"]))
                if "recorded" in at:
                    stretches.append((at["answered"], at["recorded"], HUB, "recorded"))
    for escalation in escalations:
        decided = escalation.decided_at or (end if not ended else escalation.created_at)
        stretches.append((us(escalation.created_at), us(decided), HUMAN, "waiting for a human"))
    segments: list[Segment] = []
    cursor = 0
    measured = bool(handed) or any(message.call_times for message in requests)
    # In order of start (a human's wait first among those starting together); a stretch that
    # overlaps the one before keeps only what is left after it.
    for left, right, who, what in sorted(stretches, key=lambda s: (s[0], s[2] != HUMAN)):
        left, right = max(left, cursor), min(right, total)
        if right <= left:
            continue
        if left > cursor:
            segments.append(_gap(cursor, left, handed, measured))
        segments.append(Segment(who, what, left, right))
        cursor = right
    if cursor < total:
        segments.append(_gap(cursor, total, handed, measured))
    return _merged(segments)


def _gap(left: int, right: int, handed: list[tuple[int, int]], measured: bool) -> Segment:
    if not measured:
        return Segment(UNMEASURED, "not measured", left, right)
    if any(delivered <= left for delivered, _ in handed):
        # After the work was handed over: the agent's (a task it answered as still working
        # and the hub followed to its end).
        return Segment(AGENT, "working", left, right)
    return Segment(HUB, "in the hub", left, right)


def _merged(segments: list[Segment]) -> list[Segment]:
    out: list[Segment] = []
    for segment in segments:
        if out and out[-1].who == segment.who and out[-1].what == segment.what:
            out[-1] = Segment(segment.who, segment.what, out[-1].start_us, segment.end_us)
        else:
            out.append(segment)
    return out


def _micros(delta: timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _answer(task: Task, messages: list[Message]) -> list[PartView]:
    replies = [m for m in messages if m.direction == Direction.REPLY]
    status = task.status_message if isinstance(task.status_message, dict) else None
    if status and status.get("parts"):
        return part_views(status["parts"])
    return part_views(replies[-1].parts) if replies else []


def _status_text(payload: Any) -> str:
    status = ((payload or {}).get("statusUpdate") or {}).get("status") or {}
    message = status.get("message") or {}
    parts = message.get("parts") if isinstance(message, dict) else None
    return " ".join(p.text for p in part_views(parts) if p.kind == "text")[:300]


def _attributes(task: Task, first: Message | None) -> list[tuple[str, str]]:
    values = [
        ("task", task.pk),
        ("context", task.context_id),
        ("trace", task.trace_id),
        ("caller", task.caller.slug if task.caller else "hub"),
        ("target", task.target.slug),
        ("addressed to", task.addressed_to.slug if task.addressed_to else ""),
        ("skill", task.skill),
        ("depth", str(task.depth)),
        ("chain", " → ".join(str(slug) for slug in task.path or ())),
        ("deadline", task.deadline.isoformat() if task.deadline else ""),
        ("agent's task id", task.remote_task_id),
        ("reason", task.reason),
    ]
    if first is not None:
        replay = hub_metadata(first.request_metadata).get("replay")
        if isinstance(replay, dict):
            values.append(("replay of", f"task {replay.get('of', '')} (set {replay.get('set')})"))
        if first.kind != "request":
            values.append(("kind", first.kind))
    return [(name, value) for name, value in values if value]


def _refused_attempts(first: Message | None) -> list[Message]:
    """Earlier attempts of the task's first request the policy refused (a refused message is
    judged anew when sent again)."""
    if first is None or first.sender_id is None:
        return []
    return list(
        Message.objects.filter(
            sender_id=first.sender_id,
            created_at__gte=first.created_at - RETRY_WINDOW,
            created_at__lt=first.created_at,
            message_id=first.message_id,
            decision=Decision.REJECT,
        ).order_by("created_at")[:20]
    )
