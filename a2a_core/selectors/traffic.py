"""Reads for the live traffic feed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.db.models import Q, QuerySet

from a2a_core.models import Message


@dataclass(frozen=True)
class TrafficFilter:
    """What the feed shows: messages to or from an agent (slug), of a kind, with a decision."""

    agent: str = ""
    kind: str = ""
    decision: str = ""

    def matches(
        self, *, kind: str, decision: str, agent_ids: frozenset[int], agent_id: int | None
    ) -> bool:
        if self.kind and kind != self.kind:
            return False
        if self.decision and decision != self.decision:
            return False
        return not self.agent or (agent_id is not None and agent_id in agent_ids)


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
    return list(rows[:limit])
