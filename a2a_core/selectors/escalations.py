"""Reads for the escalation inbox: what waits for a human, and what humans decided lately."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from django.db.models import QuerySet

from a2a_core.errors import NotFound
from a2a_core.models import Agent, Escalation, EscalationKind, EscalationStatus, Skill, Task
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

    @property
    def answer_schema_json(self) -> str:
        return json.dumps(self.escalation.answer_schema, indent=2, sort_keys=True)

    @property
    def answer_data_json(self) -> str:
        return json.dumps(self.escalation.answer_data, indent=2, sort_keys=True)


@dataclass
class EscalationInbox:
    pending: list[EscalationCard]
    decided: list[EscalationCard]
    pending_total: int


def _rows() -> QuerySet[Escalation]:
    return Escalation.objects.select_related(
        "agent", "task", "task__caller", "task__target", "message", "decided_by"
    )


def escalation_inbox(*, pending_limit: int = 50, decided_limit: int = 20) -> EscalationInbox:
    """Pending escalations, most urgent then newest first, and the latest decided ones.

    A fixed number of queries plus one per level of delegation depth (see `_chains`).
    """
    pending = list(
        _rows()
        .filter(status=EscalationStatus.PENDING)
        .order_by("-priority_rank", "-created_at", "-pk")[:pending_limit]
    )
    total = len(pending)
    if total == pending_limit:
        total = Escalation.objects.filter(status=EscalationStatus.PENDING).count()
    decided = list(
        _rows()
        .exclude(status=EscalationStatus.PENDING)
        .order_by("-decided_at", "-pk")[:decided_limit]
    )
    cards = _cards([*pending, *decided])
    return EscalationInbox(
        pending=cards[: len(pending)], decided=cards[len(pending) :], pending_total=total
    )


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
