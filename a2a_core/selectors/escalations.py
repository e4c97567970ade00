"""Reads for the escalation inbox: what waits for a human, and what humans decided lately."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Count, OrderBy, Q, QuerySet
from django.db.models.functions import Coalesce
from django.utils import timezone

from a2a_core.errors import NotFound
from a2a_core.models import (
    Agent,
    AuditEvent,
    Escalation,
    EscalationKind,
    EscalationStatus,
    Skill,
    Task,
)
from a2a_core.schemas.a2a import text_of
from a2a_core.selectors.edit_diffs import EditDiff, edit_diff
from a2a_core.selectors.inbox_filter import (
    CARDS_PAGE,
    CARDS_UP_TO,
    DECIDED,
    KEYS,
    LIST_PAGE,
    SORTS,
    Cursor,
    InboxFilter,
    rows_past,
)


@dataclass
class EscalationCard:
    escalation: Escalation
    # The delegation chain, root task first, this escalation's task last.
    chain: list[Task]
    # What the held message says (approvals), masked where content rules found something.
    message_text: str = ""
    # What content rules found in it: rule, kind, where, start, length (never the text).
    content_findings: list[dict[str, Any]] = field(default_factory=list)
    # Agents a held message can go to instead: first those with the task's skill, then the rest.
    skilled: list[str] = field(default_factory=list)
    others: list[str] = field(default_factory=list)
    # The ids of identical held messages folded into this card, this one first.
    fold: list[int] = field(default_factory=list)
    # The form to edit a held message before approving it, and the fields of a structured
    # answer (the dashboard fills them in).
    edit: Any = None
    answer_form: list[Any] = field(default_factory=list)

    @property
    def fold_ids(self) -> str:
        return ",".join(str(pk) for pk in self.fold or [self.escalation.pk])

    @property
    def others_folded(self) -> str:
        return ",".join(str(pk) for pk in self.fold[1:])

    @property
    def answer_schema_json(self) -> str:
        return json.dumps(self.escalation.answer_schema, indent=2, sort_keys=True)

    @property
    def answer_data_json(self) -> str:
        return json.dumps(self.escalation.answer_data, indent=2, sort_keys=True)


@dataclass
class EscalationGroup:
    key: str
    label: str
    cards: list[EscalationCard]
    # Pending escalations in the group, including those past the page's limit.
    total: int = 0


@dataclass
class EscalationInbox:
    pending: list[EscalationCard]
    decided: list[EscalationCard]
    # Pending escalations matching the filters (each folded one counted).
    pending_total: int
    # Cards the filters let through, before the limit (a fold is one card).
    card_total: int = 0
    groups: list[EscalationGroup] = field(default_factory=list)
    # One line per item (the dense list) rather than cards.
    dense: bool = False
    # Keyset paging: the first and last item shown, and whether items come before or after.
    has_before: bool = False
    has_after: bool = False
    # The newest escalation id when the page was read: "select all matching" decides no
    # escalation that arrived after it (the count the person confirmed stays the count).
    upto: int = 0

    @property
    def first_pk(self) -> int | None:
        return self.pending[0].escalation.pk if self.pending else None

    @property
    def last_pk(self) -> int | None:
        return self.pending[-1].escalation.pk if self.pending else None


def _rows() -> QuerySet[Escalation]:
    return Escalation.objects.select_related(
        "agent", "task", "task__caller", "task__target", "message", "decided_by"
    )


def escalation_inbox(
    *,
    filters: InboxFilter | None = None,
    pending_limit: int | None = None,
    decided_limit: int = 20,
    fold: bool = True,
    cursor: Cursor | None = None,
) -> EscalationInbox:
    """Pending escalations matching `filters` in its order (most urgent then newest first by
    default), a page at a time from `cursor`, and the latest decided ones matching them too.

    Up to CARDS_UP_TO matches (or with `view=cards`) they are cards: identical held messages
    (same caller, target and content) are one card with `fold`, placed where the first of them
    would be, carrying the others' ids; the pending list reads the ids of every match from the
    cursor on (one narrow query), then the page's cards' rows. Beyond that (or with
    `view=list`) it is the dense list: one line an item, LIST_PAGE lines a page, read with the
    page's keyset (a fixed number of queries, whatever the total).
    """
    filters = filters or InboxFilter()
    cursor = cursor or Cursor()
    now = timezone.now()
    pending_rows = _pending(filters, now)
    total = pending_rows.count()
    dense = filters.view == "list" or (filters.view != "cards" and total > CARDS_UP_TO)
    keys = KEYS[filters.sort]
    mark = cursor.after or cursor.before
    at = Escalation.objects.filter(pk=mark).first() if mark else None
    page_rows = pending_rows
    if at is not None:
        page_rows = page_rows.filter(rows_past(keys, at, forward=cursor.after is not None))
    backwards = cursor.last or (at is not None and cursor.before is not None)
    order = SORTS[filters.sort]
    group_totals = _group_totals(pending_rows, filters.group)
    if dense:
        limit = pending_limit or LIST_PAGE
        ordering = [_reverse(o) for o in order] if backwards else list(order)
        pks = list(page_rows.order_by(*ordering).values_list("pk", flat=True)[: limit + 1])
        more = len(pks) > limit
        pks = pks[:limit]
        if backwards:
            pks.reverse()
        shown = [[pk] for pk in pks]
    else:
        limit = pending_limit or CARDS_PAGE
        folds: dict[str, list[int]] = {}
        for pk, fingerprint in page_rows.order_by(*order).values_list("pk", "fingerprint"):
            key = fingerprint if fold and fingerprint else f"#{pk}"
            folds.setdefault(key, []).append(pk)
        shown = list(folds.values())[:limit]
        more = len(folds) > limit
        backwards = False
    leads = _rows().in_bulk([ids[0] for ids in shown])
    pending = [leads[ids[0]] for ids in shown if ids[0] in leads]
    decided = (
        list(
            filters.narrows(_rows().filter(status__in=DECIDED), now=now).order_by(
                "-decided_at", "-pk"
            )[:decided_limit]
        )
        if decided_limit
        else []
    )
    if dense:
        decided = decided[: decided_limit // 2]  # lines: the page's bytes go to the pending
    cards = _cards([*pending, *decided], options=not dense)
    pending_cards = cards[: len(pending)]
    fold_of = {ids[0]: ids for ids in shown}
    for card in pending_cards:
        card.fold = fold_of[card.escalation.pk]
    has_before = has_after = False
    if pending:
        first, last = pending[0], pending[-1]
        has_after = more if not backwards else _any_past(pending_rows, keys, last, True)
        # The first page has nothing before it; a page after an item, whatever is before it.
        has_before = (
            more if backwards else at is not None and _any_past(pending_rows, keys, first, False)
        )
    upto = Escalation.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    return EscalationInbox(
        pending=pending_cards,
        decided=cards[len(pending) :],
        pending_total=total,
        card_total=total if dense else len(shown) + (1 if more else 0),
        groups=_groups(pending_cards, filters.group, group_totals),
        dense=dense,
        has_before=has_before,
        has_after=has_after,
        upto=upto,
    )


def _pending(filters: InboxFilter, now: datetime) -> QuerySet[Escalation]:
    rows = filters.narrows(Escalation.objects.filter(status=EscalationStatus.PENDING), now=now)
    if filters.state == "claimed":
        return rows.exclude(claimed_by_name="")
    if filters.state == "unclaimed":
        return rows.filter(claimed_by_name="")
    return rows


def matching_pending(*, filters: InboxFilter, upto: int | None = None) -> list[int]:
    """The ids of every pending escalation the view's filters match, oldest id first; with
    `upto`, none newer than that id (what "select all N matching" was shown)."""
    rows = _pending(filters, timezone.now())
    if upto:
        rows = rows.filter(pk__lte=upto)
    return list(rows.order_by("pk").values_list("pk", flat=True))


def _reverse(expression: str | OrderBy) -> str | OrderBy:
    if isinstance(expression, OrderBy):
        # Empty deadlines come last going forward, so first going back.
        return OrderBy(
            expression.expression, descending=not expression.descending, nulls_first=True
        )
    return expression[1:] if expression.startswith("-") else f"-{expression}"


def _any_past(
    rows: QuerySet[Escalation], keys: tuple[tuple[str, bool], ...], row: Escalation, forward: bool
) -> bool:
    return rows.filter(rows_past(keys, row, forward=forward)).exists()


def _group_totals(rows: QuerySet[Escalation], grouping: str) -> dict[str, int]:
    """How many pending escalations each group holds, on this page or not (one query)."""
    if grouping == "agent":
        counted = rows.values_list("agent__slug").annotate(n=Count("pk")).order_by()
    elif grouping == "chain":
        counted = (
            rows.annotate(chain=Coalesce("task__root_id", "task_id"))
            .values_list("chain")
            .annotate(n=Count("pk"))
            .order_by()
        )
    else:
        return {}
    return dict(counted)


def _groups(
    cards: list[EscalationCard], grouping: str, totals: dict[str, int]
) -> list[EscalationGroup]:
    """Cards by asking agent, or by delegation chain (their root task), in order of first
    appearance; none without a grouping."""
    groups: dict[str, EscalationGroup] = {}
    for card in cards:
        e = card.escalation
        if grouping == "agent":
            key, label = e.agent.slug, e.agent.slug
        elif grouping == "chain":
            root = card.chain[0]
            key = root.pk
            hops = [
                root.caller.slug if root.caller else "a human",
                *(t.target.slug for t in card.chain),
            ]
            label = " → ".join(dict.fromkeys(hops))
        else:
            return []
        group = groups.setdefault(
            key, EscalationGroup(key=key, label=label, cards=[], total=totals.get(key, 0))
        )
        group.cards.append(card)
    return list(groups.values())


# The menus of the pending items, by (newest escalation id, pending count): while neither
# changes, the pending items are the same ones and so are their menus. The DISTINCT behind them
# reads every pending row: 10,000 pending on SQLite, 120 ms on a loaded machine (2026-11-29).
_menus: dict[tuple[int, int], dict[str, Any]] = {}


def escalation_filter_options(
    *, upto: int | None = None, pending: int | None = None
) -> dict[str, Any]:
    """What the inbox's menus offer: the agents, pairs and skills of pending items, and every
    agent (to redirect to). One DISTINCT over the pending rows by agent id, unordered (the
    model's ordering made every row distinct: 430 ms as three such over slugs), then the
    agents' slugs. Given the inbox's newest id and pending count, a process reads the menus
    again only once either changed."""
    slugs = dict(Agent.objects.order_by("slug").values_list("pk", "slug"))
    key = (upto, pending) if upto is not None and pending is not None else None
    menus = _menus.get(key) if key is not None else None
    if menus is None:
        combos = set(
            Escalation.objects.filter(status=EscalationStatus.PENDING)
            .order_by()
            .values_list("agent_id", "task__caller_id", "task__target_id", "task__skill")
            .distinct()
        )
        pairs = sorted(
            {
                (slugs[caller], slugs[target])
                for _, caller, target, _ in combos
                if caller in slugs and target in slugs
            }
        )
        menus = {
            "agents": sorted({slugs[agent] for agent, *_ in combos if agent in slugs}),
            "pairs": [(f"{caller}:{target}", f"{caller} → {target}") for caller, target in pairs],
            "pair_values": [f"{caller}:{target}" for caller, target in pairs],
            # The pairs by caller (the menu's groups: each caller's name once).
            "pair_groups": [
                (caller, [(f"{c}:{t}", t) for c, t in pairs if c == caller])
                for caller in dict.fromkeys(c for c, _ in pairs)
            ],
            "skills": sorted({skill for *_, skill in combos if skill}),
        }
        if key is not None:
            _menus.clear()
            _menus[key] = menus
    return {
        **menus,
        "priorities": ["urgent", "high", "normal", "low"],
        "agents_all": list(slugs.values())[:500],
    }


def escalation_card(*, escalation_id: int) -> EscalationCard:
    escalation = _rows().filter(pk=escalation_id).first()
    if escalation is None:
        raise NotFound(f"there is no escalation {escalation_id}")
    return _cards([escalation])[0]


def _cards(escalations: list[Escalation], *, options: bool = True) -> list[EscalationCard]:
    """The escalations' cards; with `options`, the agents an open held message can be
    redirected to (the dense list's lines offer no redirect)."""
    chains = _chains([e.task for e in escalations])
    approvals = [
        e for e in escalations if e.kind == EscalationKind.APPROVAL and e.is_open and options
    ]
    deciding = {e.pk for e in approvals}
    slugs: list[str] = []
    holders: dict[str, set[str]] = {}
    if approvals:
        slugs = list(Agent.objects.order_by("slug").values_list("slug", flat=True)[:500])
        skills = {e.task.skill for e in approvals if e.task.skill}
        for skill_id, slug in Skill.objects.filter(skill_id__in=skills).values_list(
            "skill_id", "agent__slug"
        ):
            holders.setdefault(skill_id, set()).add(slug)
    cards = []
    for escalation in escalations:
        card = EscalationCard(escalation=escalation, chain=chains[escalation.task_id])
        if escalation.message is not None:
            card.message_text = text_of(escalation.message.parts) or escalation.message.summary
            card.content_findings = list(escalation.message.content_findings or [])
        if escalation.pk in deciding:
            task = escalation.task
            parties = {task.caller.slug if task.caller else "", task.target.slug}
            skilled = holders.get(task.skill, set())
            card.skilled = [s for s in slugs if s in skilled and s not in parties]
            card.others = [s for s in slugs if s not in skilled and s not in parties]
        cards.append(card)
    return cards


def _chains(tasks: list[Task]) -> dict[str, list[Task]]:
    """Each task's delegation chain (root first), walking parents a level per query."""
    known: dict[str, Task] = {t.pk: t for t in tasks}
    wanted = {t.parent_id for t in known.values() if t.parent_id} - set(known)
    while wanted:
        found = Task.objects.select_related("caller", "target").in_bulk(list(wanted))
        known.update(found)
        wanted = {t.parent_id for t in found.values() if t.parent_id} - set(known)
    chains = {}
    for task in tasks:
        chain = [task]
        while chain[0].parent_id in known and len(chain) <= 64:
            chain.insert(0, known[chain[0].parent_id])
        chains[task.pk] = chain
    return chains


def escalation_counts() -> tuple[int, int]:
    """(pending, expiring): escalations waiting for a human, and how many of them expire
    within HUB_NOTIFY_WARN_SECONDS (the window of the deadline warning). One query."""
    now = timezone.now()
    soon = Q(
        deadline__gt=now, deadline__lte=now + timedelta(seconds=settings.HUB_NOTIFY_WARN_SECONDS)
    )
    counts = Escalation.objects.filter(status=EscalationStatus.PENDING).aggregate(
        pending=Count("pk"), expiring=Count("pk", filter=soon)
    )
    return counts["pending"], counts["expiring"]


@dataclass
class EscalationPage:
    card: EscalationCard
    # The held message's parts as JSON (approvals), or the question's answer schema.
    payload_json: str
    # What people did to it, oldest first: claims, takeovers, releases, the decision.
    history: list[Any]
    edit: EditDiff | None


def escalation_page(*, escalation_id: int) -> EscalationPage:
    """One escalation on a page of its own: its card, payload, history and edit."""
    card = escalation_card(escalation_id=escalation_id)
    e = card.escalation
    if e.message is not None:
        payload: Any = {"parts": e.message.parts}
        if e.message.envelope:
            payload["envelope"] = e.message.envelope
    else:
        payload = {"question": e.question, "answerSchema": e.answer_schema, "options": e.options}
    history = list(
        AuditEvent.objects.filter(object_type="escalation", object_id=str(e.pk))
        .select_related("actor")
        .order_by("created_at", "pk")[:200]
    )
    return EscalationPage(
        card=card,
        payload_json=json.dumps(payload, indent=2, sort_keys=True, ensure_ascii=False),
        history=history,
        edit=edit_diff(e),
    )
