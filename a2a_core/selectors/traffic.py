"""Reads for the live traffic feed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from a2a_core.models import Message


@dataclass(frozen=True)
class TrafficFilter:
    """What the feed shows: messages to or from an agent (slug), from one agent to another, of
    a kind, with a decision, on a task in a state, whose summary holds a text, in a time span."""

    agent: str = ""
    sender: str = ""
    target: str = ""
    kind: str = ""
    decision: str = ""
    state: str = ""
    text: str = ""
    since: datetime | None = None
    until: datetime | None = None

    def matches(
        self,
        *,
        kind: str,
        decision: str,
        agent_ids: frozenset[int],
        agent_id: int | None,
        sender: str = "",
        target: str = "",
        state: str = "",
        summary: str = "",
        created_at: datetime | None = None,
    ) -> bool:
        """Whether a message with these fields passes (`agent_id`: the filter's agent's id)."""
        if self.kind and kind != self.kind:
            return False
        if self.decision and decision != self.decision:
            return False
        if (self.sender and sender != self.sender) or (self.target and target != self.target):
            return False
        if self.state and state != self.state:
            return False
        if self.text and self.text.casefold() not in summary.casefold():
            return False
        if created_at is not None and (
            (self.since is not None and created_at < self.since)
            or (self.until is not None and created_at > self.until)
        ):
            return False
        return not self.agent or (agent_id is not None and agent_id in agent_ids)

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> TrafficFilter:
        """The filter a form (query string or the feed's websocket) asks for; a time that is not
        one (`2026-11-25T14:05`, in the hub's time zone) is left out."""

        def text(name: str, size: int) -> str:
            return str(values.get(name) or "").strip()[:size]

        return cls(
            agent=text("agent", 64),
            sender=text("from", 64),
            target=text("to", 64),
            kind=text("kind", 32),
            decision=text("decision", 16),
            state=text("state", 16),
            text=text("text", 200),
            since=_moment(text("since", 40)),
            until=_moment(text("until", 40)),
        )


def _moment(value: str) -> datetime | None:
    try:
        moment = datetime.fromisoformat(value) if value else None
    except ValueError:
        return None
    if moment is not None and timezone.is_naive(moment):
        moment = timezone.make_aware(moment)
    return moment


# What a row of the feed or the audit list shows: nothing else is read (the JSON columns —
# parts, metadata, a task's history — would cost more to load than the row costs to draw).
ROW_FIELDS = (
    "created_at",
    "kind",
    "direction",
    "summary",
    "recipients",
    "decision",
    "decision_reason",
    "decision_detail",
    "decision_latency_us",
    "latency_ms",
    "sender__slug",
    "target__slug",
    "redirected_to__slug",
    "author__username",
    "task__state",
    "trace_id",
    "hop",
)


ROW_RELATIONS = ("sender", "target", "task", "redirected_to", "author")


def message_rows() -> QuerySet[Message]:
    """Messages with what a listed row shows, and no more."""
    return Message.objects.select_related(*ROW_RELATIONS).only(*ROW_FIELDS)


def messages_by_pk(pks: Sequence[int]) -> list[Message]:
    """Messages in the order of `pks`."""
    found = message_rows().in_bulk(list(pks))
    return [found[pk] for pk in pks if pk in found]


def traffic_recent(*, filters: TrafficFilter, limit: int = 100) -> list[Message]:
    """The newest messages the filters let through, newest first."""
    rows = message_rows().order_by("-created_at", "-id")
    if filters.agent:
        rows = rows.filter(Q(sender__slug=filters.agent) | Q(target__slug=filters.agent))
    if filters.kind:
        rows = rows.filter(kind=filters.kind)
    if filters.decision:
        rows = rows.filter(decision=filters.decision)
    if filters.sender:
        rows = rows.filter(sender__slug=filters.sender)
    if filters.target:
        rows = rows.filter(target__slug=filters.target)
    if filters.state:
        rows = rows.filter(task__state=filters.state)
    if filters.text:
        rows = rows.filter(summary__icontains=filters.text)
    if filters.since is not None:
        rows = rows.filter(created_at__gte=filters.since)
    if filters.until is not None:
        rows = rows.filter(created_at__lte=filters.until)
    return list(rows[:limit])
