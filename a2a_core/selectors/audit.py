"""Reads for the audit: search every message the hub recorded, a page at a time (its exports
are `a2a_core.selectors.audit_export`).

Pages are keyset-paginated on (created_at, id), newest first, with no COUNT and no OFFSET, so
the first page costs the same over a thousand messages or a million. Each filter narrows the
scan of one index (see `Message.Meta.indexes`). Free text is the exception: it matches the
summary, which no index covers, so a page looks through at most `TEXT_WINDOW` messages (those
the other filters let through, from where the page starts) and says where it stopped.
"""

from __future__ import annotations

import base64
import functools
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import (
    BooleanField,
    Exists,
    ExpressionWrapper,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
)

from a2a_core.errors import FieldProblem, NotFound, ValidationFailed
from a2a_core.models import (
    Agent,
    Delivery,
    Message,
    Task,
)
from a2a_core.selectors.deciders import message_deciders
from a2a_core.selectors.task_wire import iso, message_view
from a2a_core.selectors.traffic import ROW_RELATIONS, message_rows

PAGE_SIZE = 50
# A text search looks through this many messages per page, read this many at a time.
TEXT_WINDOW = 10_000
TEXT_CHUNK = 2_500
# A task state with at most this many tasks is searched from the tasks' side.
RARE_STATE_TASKS = 1_000

Position = tuple[datetime, int]  # (created_at, id) of a message


@dataclass(frozen=True)
class AuditFilter:
    """Which messages: every field given must match (agents by id; `text` in the summary)."""

    agent_id: int | None = None  # the sender or the target
    sender_id: int | None = None
    target_id: int | None = None
    kind: str = ""
    decision: str = ""
    reason: str = ""
    state: str = ""  # the current state of the message's task
    since: datetime | None = None  # inclusive
    until: datetime | None = None  # exclusive
    text: str = ""


@dataclass(frozen=True)
class Cursor:
    """Where a page starts: the rows older (or, with `newer`, newer) than `position`."""

    position: Position
    newer: bool = False

    def encode(self) -> str:
        moment, pk = self.position
        raw = f"{'n' if self.newer else 'o'}|{moment.isoformat()}|{pk}"
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, token: str) -> Cursor:
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
            direction, moment, pk = raw.split("|")
            when = datetime.fromisoformat(moment)
            if direction not in ("n", "o") or when.tzinfo is None:
                raise ValueError(direction)
            return cls((when, int(pk)), newer=direction == "n")
        except (ValueError, UnicodeDecodeError):
            raise ValidationFailed(
                "invalid cursor",
                [FieldProblem("cursor", "this page link is not one the hub made; start again")],
            ) from None


@dataclass(frozen=True)
class AuditPage:
    messages: list[Message]  # newest first
    newer: Cursor | None  # the page before this one, if any
    older: Cursor | None  # the page after this one, if any
    # A text search that looked through `scanned` messages (its window) without filling the
    # page: it stopped at this moment (`older`/`newer` goes on from there).
    searched_to: datetime | None = None
    scanned: int = 0
    # How many messages the filters match, counted up to COUNT_CAP (`total_capped`: more);
    # None for a text search (counting it would read every message: its window bounds it).
    total: int | None = None
    total_capped: bool = False
    # Who made each message's decision, by pk (`selectors.deciders`).
    deciders: dict[int, str] = field(default_factory=dict)


# The audit counts its matches up to this many: a count reads every match's index entry
# (10,000 on SQLite: about 5 ms), and "more than 10,000" is as useful as the exact figure.
COUNT_CAP = 10_000


def agent_slugs(*, limit: int = 500) -> list[str]:
    """Registered agents' slugs, for the filters' suggestions."""
    return list(Agent.objects.order_by("slug").values_list("slug", flat=True)[:limit])


def agent_ids(slugs: Sequence[str]) -> dict[str, int]:
    """The ids of the registered agents among `slugs` (unknown slugs are left out)."""
    wanted = [slug for slug in slugs if slug]
    if not wanted:
        return {}
    return dict(Agent.objects.filter(slug__in=wanted).values_list("slug", "pk"))


def filter_conditions(filters: AuditFilter, *, text: bool) -> list[Q]:
    """Conditions whose union is the filtered set, each one walkable down one index in
    (created_at, id) order. `text`: match the free text here too (else the caller does)."""
    where = Q()
    if filters.sender_id is not None:
        where &= Q(sender_id=filters.sender_id)
    if filters.target_id is not None:
        where &= Q(target_id=filters.target_id)
    if filters.kind:
        where &= Q(kind=filters.kind)
    if filters.decision:
        where &= Q(decision=filters.decision)
    if filters.reason:
        where &= Q(decision_reason=filters.reason)
    if filters.state:
        where &= _in_task_state(filters.state)
    if filters.since is not None:
        where &= Q(created_at__gte=filters.since)
    if filters.until is not None:
        where &= Q(created_at__lt=filters.until)
    if text and filters.text:
        where &= Q(summary__icontains=filters.text)
    if filters.agent_id is None:
        return [where]
    # "Sent or received": an OR would make the database read all of the agent's messages to
    # sort them; two walks down the sender and target indexes, merged, read only a page.
    return [where & Q(sender_id=filters.agent_id), where & Q(target_id=filters.agent_id)]


def matching(filters: AuditFilter, *, text: bool) -> list[QuerySet[Message]]:
    return [Message.objects.filter(where) for where in filter_conditions(filters, text=text)]


def _in_task_state(state: str) -> Q:
    """Messages on a task now in `state`, in whichever form walks fewer rows."""
    tasks = Task.objects.filter(state=state)
    if tasks[: RARE_STATE_TASKS + 1].count() <= RARE_STATE_TASKS:
        # Few such tasks (maybe none): read their messages from the task index.
        return Q(task_id__in=tasks.values("pk"))
    # Many: walk the messages in order and look each one's task up by key; a join would
    # let the database sort every message of every such task first.
    return Q(Exists(tasks.filter(pk=OuterRef("task_id"))))


def beyond(rows: QuerySet[Message], position: Position, *, newer: bool) -> QuerySet[Message]:
    moment, pk = position
    # The plain range condition lets the database start the index scan at `moment`.
    if newer:
        return rows.filter(created_at__gte=moment).filter(Q(created_at__gt=moment) | Q(pk__gt=pk))
    return rows.filter(created_at__lte=moment).filter(Q(created_at__lt=moment) | Q(pk__lt=pk))


def walk(
    querysets: list[QuerySet[Message]],
    start: Position | None,
    *,
    newer: bool,
    size: int,
    text: str = "",
) -> list[tuple[datetime, int, bool]]:
    """The next `size` messages from `start` (exclusive) as (created_at, id, matches `text`),
    read from the indexes only unless `text` is given."""
    found: dict[int, tuple[datetime, int, bool]] = {}
    order = ("created_at", "pk") if newer else ("-created_at", "-pk")
    for rows in querysets:
        if start is not None:
            rows = beyond(rows, start, newer=newer)
        if text:
            hit = ExpressionWrapper(Q(summary__icontains=text), output_field=BooleanField())
            picked = rows.annotate(hit=hit).order_by(*order).values_list("created_at", "pk", "hit")
            found.update((pk, (moment, pk, bool(h))) for moment, pk, h in picked[:size])
        else:
            plain = rows.order_by(*order).values_list("created_at", "pk")
            found.update((pk, (moment, pk, True)) for moment, pk in plain[:size])
    merged = sorted(found.values(), reverse=not newer)
    return merged[:size]


def audit_page(
    *, filters: AuditFilter, cursor: Cursor | None = None, limit: int = PAGE_SIZE
) -> AuditPage:
    """One page of the filtered messages, newest first, and the cursors of its neighbours."""
    newer = cursor.newer if cursor else False
    start = cursor.position if cursor else None
    querysets = matching(filters, text=False)
    budget = TEXT_WINDOW if filters.text else limit + 1
    hits: list[Position] = []
    position = start
    scanned = 0
    exhausted = False
    while len(hits) <= limit and scanned < budget:
        size = min(TEXT_CHUNK if filters.text else limit + 1, budget - scanned)
        chunk = walk(querysets, position, newer=newer, size=size, text=filters.text)
        for moment, pk, matches in chunk:
            scanned += 1
            position = (moment, pk)
            if matches:
                hits.append(position)
                if len(hits) > limit:
                    break
        if len(chunk) < size:
            exhausted = True
            break

    more = len(hits) > limit
    hits = hits[:limit]
    onward: Position | None = None
    searched_to = None
    if more:
        onward = hits[-1]
    elif filters.text and not exhausted and position is not None:
        onward = position
        searched_to = position[0]
    back_from = hits[0] if hits else start
    back = Cursor(back_from, newer=not newer) if cursor and back_from else None
    ahead = Cursor(onward, newer=newer) if onward else None

    found = message_rows().in_bulk([pk for _, pk in hits])
    messages = [found[pk] for _, pk in hits if pk in found]
    if newer:
        messages.reverse()
    total, capped = (None, False) if filters.text else audit_total(filters=filters)
    return AuditPage(
        messages=messages,
        newer=ahead if newer else back,
        older=back if newer else ahead,
        searched_to=searched_to,
        scanned=scanned,
        total=total,
        total_capped=capped,
        deciders=message_deciders(messages),
    )


def audit_total(*, filters: AuditFilter, cap: int = COUNT_CAP) -> tuple[int, bool]:
    """How many messages the filters match, up to `cap`, and whether there are more (one
    query: the union of the walks' conditions, counted to the cap)."""
    where = functools.reduce(operator.or_, filter_conditions(filters, text=True))
    found = Message.objects.filter(where).order_by().values("pk")[: cap + 1].count()
    return min(found, cap), found > cap


# --- one message in full --------------------------------------------------------------------


def message_get(*, pk: int) -> Message:
    message = (
        Message.objects.select_related(*ROW_RELATIONS)
        .prefetch_related(
            Prefetch("deliveries", queryset=Delivery.objects.select_related("recipient"))
        )
        .filter(pk=pk)
        .first()
    )
    if message is None:
        raise NotFound(f"no message {pk}")
    return message


def _when(moment: datetime | None) -> str | None:
    return iso(moment) if moment else None


def _slug(agent: Agent | None) -> str | None:
    return agent.slug if agent else None


def message_document(message: Message) -> dict[str, Any]:
    """Everything the hub holds about a message: the A2A message as stored (in the hub's ids),
    its envelope, the policy's decision, its deliveries and its task."""
    task = message.task
    return {
        "message": message_view(message),
        "hub": {
            "id": message.pk,
            "createdAt": _when(message.created_at),
            "direction": message.direction,
            "kind": message.kind,
            "summary": message.summary,
            "from": _slug(message.sender),
            "author": message.author.get_username() if message.author else None,
            "to": _slug(message.target),
            "recipients": message.recipients,
            "hop": message.hop,
            "traceId": message.trace_id,
            "correlationId": message.correlation_id,
            "envelope": message.envelope,
            "decision": {
                "action": message.decision,
                "reason": message.decision_reason,
                "detail": message.decision_detail,
                "latencyUs": message.decision_latency_us,
                "redirectedTo": _slug(message.redirected_to),
                "policyVersion": message.decision_policy_version,
                "decidedBy": message_deciders([message]).get(message.pk) or None,
            },
            "deliveryState": message.delivery_state,
            "respondedAt": _when(message.responded_at),
            "latencyMs": message.latency_ms,
            "late": message.late,
        },
        "deliveries": [
            {
                "recipient": d.recipient.slug,
                "state": d.state,
                "decision": d.decision,
                "reason": d.decision_reason,
                "attempts": d.attempts,
                "lastAttemptAt": _when(d.last_attempt_at),
                "ackedAt": _when(d.acked_at),
                "lastError": d.last_error,
            }
            for d in message.deliveries.all()
        ],
        "task": {"id": task.pk, "state": task.state, "contextId": task.context_id}
        if task
        else None,
    }
