"""Reads for the live traffic feed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from a2a_core.models import Decision, Message
from a2a_core.schemas.events import MessageItem
from a2a_core.selectors.deciders import DecisionRef, deciders


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
    "decision_policy_version",
)


ROW_RELATIONS = ("sender", "target", "task", "redirected_to", "author")


def message_rows() -> QuerySet[Message]:
    """Messages with what a listed row shows, and no more."""
    return Message.objects.select_related(*ROW_RELATIONS).only(*ROW_FIELDS)


_DECISIONS = dict(Decision.choices)


@dataclass(frozen=True, slots=True)
class FeedRow:
    """A message as a row of the live feed shows it (templates/dashboard/traffic.html#row),
    and what the feed's filters look at. Drawn alike from the database (`of_message`, a page's
    first render) and from a `traffic` event (`of_item`, the live relay), so that a row that
    arrived live is the row a reload shows."""

    pk: int
    created_at: datetime
    kind: str
    direction: str
    decision: str
    decision_reason: str
    decision_detail: str
    decision_latency_us: int | None
    latency_ms: int | None
    summary: str
    # Agents by slug ("" when none), the human author by username.
    sender: str
    target: str
    redirected_to: str
    author: str
    sender_id: int | None
    target_id: int | None
    recipients: int
    task_id: str
    task_state: str
    trace_id: str
    hop: int
    policy_version: int | None = None
    # Who made the decision: a person, or "policy v3 by alice" (`selectors.deciders`);
    # filled in by `with_deciders`.
    decided_by: str = ""

    @property
    def decision_display(self) -> str:
        return str(_DECISIONS.get(self.decision, self.decision))

    @property
    def task(self) -> dict[str, str] | None:
        """What the task-state badge draws."""
        return {"pk": self.task_id, "state": self.task_state} if self.task_id else None

    @classmethod
    def of_message(cls, message: Message) -> FeedRow:
        """The row of a message read with `message_rows`."""
        task = message.task
        return cls(
            pk=message.pk,
            created_at=message.created_at,
            kind=message.kind,
            direction=message.direction,
            decision=message.decision,
            decision_reason=message.decision_reason,
            decision_detail=message.decision_detail,
            decision_latency_us=message.decision_latency_us,
            latency_ms=message.latency_ms,
            summary=message.summary,
            sender=message.sender.slug if message.sender else "",
            target=message.target.slug if message.target else "",
            redirected_to=message.redirected_to.slug if message.redirected_to else "",
            author=message.author.get_username() if message.author else "",
            sender_id=message.sender_id,
            target_id=message.target_id,
            recipients=len(message.recipients or ()),
            task_id=task.pk if task else "",
            task_state=task.state if task else "",
            trace_id=message.trace_id,
            hop=message.hop,
            policy_version=message.decision_policy_version,
        )

    @property
    def decision_ref(self) -> DecisionRef:
        return DecisionRef(
            self.pk, self.decision_reason, self.policy_version, self.author, self.decision_detail
        )

    @classmethod
    def of_item(cls, item: MessageItem, slugs: Mapping[int, str]) -> FeedRow | None:
        """The row of a message from its `traffic` item, agents named from `slugs`; None when
        the item does not carry its row."""
        row = item.row
        if row is None:
            return None

        def slug(pk: int | None) -> str:
            return slugs.get(pk, "") if pk is not None else ""

        return cls(
            pk=item.message_pk,
            created_at=datetime.fromisoformat(row.created_at),
            kind=item.kind,
            direction=item.direction,
            decision=item.decision,
            decision_reason=item.reason,
            decision_detail=row.detail,
            decision_latency_us=row.decision_latency_us,
            latency_ms=row.latency_ms,
            summary=row.summary,
            sender=slug(item.sender_id),
            target=slug(item.target_id),
            redirected_to=slug(row.redirected_to_id),
            author=row.author or "",
            sender_id=item.sender_id,
            target_id=item.target_id,
            recipients=row.recipients,
            task_id=item.task_id or "",
            task_state=item.state if item.task_id else "",
            trace_id=row.trace_id,
            hop=row.hop,
            policy_version=row.policy_version,
        )


def with_deciders(rows: list[FeedRow]) -> list[FeedRow]:
    """The rows, each with who made its decision (one query for the human ones)."""
    names = deciders(row.decision_ref for row in rows)
    return [replace(row, decided_by=names.get(row.pk, "")) for row in rows]


def messages_by_pk(pks: Sequence[int]) -> list[Message]:
    """Messages in the order of `pks`."""
    found = message_rows().in_bulk(list(pks))
    return [found[pk] for pk in pks if pk in found]


def feed_rows_by_pk(pks: Sequence[int]) -> dict[int, FeedRow]:
    """The feed rows of these messages, by pk."""
    rows = with_deciders([FeedRow.of_message(m) for m in messages_by_pk(pks)])
    return {row.pk: row for row in rows}


def traffic_recent(*, filters: TrafficFilter, limit: int = 100) -> list[FeedRow]:
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
    return with_deciders([FeedRow.of_message(m) for m in rows[:limit]])
