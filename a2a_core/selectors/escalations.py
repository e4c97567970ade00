"""Reads for the escalation inbox: what waits for a human, and what humans decided lately."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.db.models import Count, F, OrderBy, Q, QuerySet
from django.utils import timezone

from a2a_core.errors import NotFound
from a2a_core.models import (
    Agent,
    Escalation,
    EscalationKind,
    EscalationStatus,
    Priority,
    Skill,
    Task,
)
from a2a_core.schemas.a2a import text_of


@dataclass
class EscalationCard:
    escalation: Escalation
    # The delegation chain, root task first, this escalation's task last.
    chain: list[Task]
    # What the held message says (approvals).
    message_text: str = ""
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


SORTS: dict[str, tuple[str | OrderBy, ...]] = {
    "priority": ("-priority_rank", "-created_at", "-pk"),
    "deadline": (F("deadline").asc(nulls_last=True), "-priority_rank", "pk"),
    "newest": ("-created_at", "-pk"),
    "oldest": ("created_at", "pk"),
}
AGES = {"5m": timedelta(minutes=5), "1h": timedelta(hours=1), "1d": timedelta(days=1)}
STATES = ("claimed", "unclaimed")
GROUPINGS = ("agent", "chain")


@dataclass(frozen=True)
class InboxFilter:
    """What the inbox shows; every field is a URL parameter of the page (unknown values are
    dropped, never an error: a shared link keeps working)."""

    agent: str = ""
    # "caller:target"
    pair: str = ""
    kind: str = ""
    priority: str = ""
    skill: str = ""
    # Older than: one of AGES.
    age: str = ""
    # One of STATES.
    state: str = ""
    q: str = ""
    sort: str = "priority"
    # One of GROUPINGS.
    group: str = ""

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> InboxFilter:
        def pick(name: str, allowed: Iterable[str], default: str = "") -> str:
            value = str(params.get(name) or "")
            return value if value in allowed else default

        def text(name: str, size: int) -> str:
            return str(params.get(name) or "").replace("\x00", "").strip()[:size]

        return cls(
            agent=text("agent", 64),
            pair=text("pair", 130) if ":" in str(params.get("pair") or "") else "",
            kind=pick("kind", EscalationKind.values),
            priority=pick("priority", Priority.values),
            skill=text("skill", 200),
            age=pick("age", AGES),
            state=pick("state", STATES),
            q=text("q", 200),
            sort=pick("sort", SORTS, "priority"),
            group=pick("group", GROUPINGS),
        )

    def query(self) -> str:
        """The URL query of this view (defaults left out)."""
        values = {
            k: v for k, v in asdict(self).items() if v and not (k == "sort" and v == "priority")
        }
        return urlencode(values)

    def narrows(self, rows: QuerySet[Escalation], *, now: datetime) -> QuerySet[Escalation]:
        where = Q()
        if self.agent:
            where &= Q(agent__slug=self.agent)
        if self.pair:
            caller, _, target = self.pair.partition(":")
            where &= Q(task__caller__slug=caller, task__target__slug=target)
        if self.kind:
            where &= Q(kind=self.kind)
        if self.priority:
            where &= Q(priority=self.priority)
        if self.skill:
            where &= Q(task__skill=self.skill)
        if self.age:
            where &= Q(created_at__lte=now - AGES[self.age])
        if self.q:
            where &= (
                Q(question__icontains=self.q)
                | Q(reason__icontains=self.q)
                | Q(message__summary__icontains=self.q)
                | Q(agent__slug__icontains=self.q)
                | Q(task__target__slug__icontains=self.q)
            )
        return rows.filter(where)


def _rows() -> QuerySet[Escalation]:
    return Escalation.objects.select_related(
        "agent", "task", "task__caller", "task__target", "message", "decided_by"
    )


def escalation_inbox(
    *,
    filters: InboxFilter | None = None,
    pending_limit: int = 50,
    decided_limit: int = 20,
    fold: bool = True,
) -> EscalationInbox:
    """Pending escalations matching `filters` in its order (most urgent then newest first by
    default), and the latest decided ones matching them too.

    With `fold`, identical held messages (same caller, target and content) are one card,
    placed where the first of them would be, carrying the others' ids. The pending list
    reads the ids of every match (one narrow query), then the first `pending_limit` cards'
    rows: a fixed number of queries plus one per level of delegation depth (see `_chains`).
    """
    filters = filters or InboxFilter()
    now = timezone.now()
    pending_rows = filters.narrows(
        Escalation.objects.filter(status=EscalationStatus.PENDING), now=now
    )
    if filters.state == "claimed":
        pending_rows = pending_rows.exclude(claimed_by_name="")
    elif filters.state == "unclaimed":
        pending_rows = pending_rows.filter(claimed_by_name="")
    folds: dict[str, list[int]] = {}
    # How many pending escalations each group holds, shown or not.
    group_totals: dict[str, int] = {}
    total = 0
    for pk, fingerprint, agent_slug, root_id, task_id in pending_rows.order_by(
        *SORTS[filters.sort]
    ).values_list("pk", "fingerprint", "agent__slug", "task__root_id", "task_id"):
        total += 1
        key = fingerprint if fold and fingerprint else f"#{pk}"
        folds.setdefault(key, []).append(pk)
        group = agent_slug if filters.group == "agent" else root_id or task_id
        group_totals[group] = group_totals.get(group, 0) + 1
    shown = list(folds.values())[:pending_limit]
    leads = _rows().in_bulk([ids[0] for ids in shown])
    pending = [leads[ids[0]] for ids in shown if ids[0] in leads]
    decided = (
        list(
            filters.narrows(_rows().exclude(status=EscalationStatus.PENDING), now=now).order_by(
                "-decided_at", "-pk"
            )[:decided_limit]
        )
        if decided_limit
        else []
    )
    cards = _cards([*pending, *decided])
    pending_cards = cards[: len(pending)]
    fold_of = {ids[0]: ids for ids in shown}
    for card in pending_cards:
        card.fold = fold_of[card.escalation.pk]
    return EscalationInbox(
        pending=pending_cards,
        decided=cards[len(pending) :],
        pending_total=total,
        card_total=len(folds),
        groups=_groups(pending_cards, filters.group, group_totals),
    )


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


def escalation_filter_options() -> dict[str, Any]:
    """What the inbox's menus offer: the agents, pairs and skills of pending items, and every
    agent (to redirect to)."""
    pending = Escalation.objects.filter(status=EscalationStatus.PENDING)
    pairs = sorted(
        set(
            pending.filter(task__caller__isnull=False)
            .values_list("task__caller__slug", "task__target__slug")
            .distinct()
        )
    )
    return {
        "agents": sorted(set(pending.values_list("agent__slug", flat=True).distinct())),
        "pairs": [(f"{caller}:{target}", f"{caller} → {target}") for caller, target in pairs],
        "pair_values": [f"{caller}:{target}" for caller, target in pairs],
        "skills": sorted(
            set(pending.exclude(task__skill="").values_list("task__skill", flat=True).distinct())
        ),
        "priorities": ["urgent", "high", "normal", "low"],
        "agents_all": list(Agent.objects.order_by("slug").values_list("slug", flat=True)[:500]),
    }


def escalation_card(*, escalation_id: int) -> EscalationCard:
    escalation = _rows().filter(pk=escalation_id).first()
    if escalation is None:
        raise NotFound(f"there is no escalation {escalation_id}")
    return _cards([escalation])[0]


def _cards(escalations: list[Escalation]) -> list[EscalationCard]:
    chains = _chains([e.task for e in escalations])
    approvals = [e for e in escalations if e.kind == EscalationKind.APPROVAL and e.is_open]
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
