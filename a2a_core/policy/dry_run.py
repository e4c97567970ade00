"""Dry-run: a draft policy against recorded traffic, before anyone publishes it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import Exists, OuterRef

from a2a_core.errors import FieldProblem, ValidationFailed
from a2a_core.models import Agent, Direction, Message, Skill
from a2a_core.policy.decide import CompiledPolicy, Context, Facts, Usage, decide
from a2a_core.policy.judge import agent_state
from a2a_core.policy.state import Windows
from a2a_core.schemas.policy import parse_policy


@dataclass
class DryRun:
    """What a draft policy would have decided differently on recorded messages."""

    messages: int = 0
    changed: int = 0
    # "deliver -> reject" -> count
    transitions: dict[str, int] = field(default_factory=dict)
    # the new reason of each changed decision -> count
    reasons: dict[str, int] = field(default_factory=dict)
    examples: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "messages": self.messages,
            "changed": self.changed,
            "transitions": self.transitions,
            "reasons": self.reasons,
            "examples": self.examples,
            "notes": self.notes,
        }


def policy_dry_run(*, document: Any, last: int = 1000, examples: int = 20) -> DryRun:
    """Replay the last `last` requests through the draft `document` (validated first) and
    report every decision that would change. Rate windows are replayed from the messages'
    own times; agents are judged as they are now; concurrency and breakers are not replayed."""
    draft = CompiledPolicy(parse_policy(document))
    if not 1 <= last <= 100_000:
        raise ValidationFailed(
            "invalid dry-run size", [FieldProblem("last", "between 1 and 100,000")]
        )
    earlier = Message.objects.filter(
        task=OuterRef("task"), direction=Direction.REQUEST, pk__lt=OuterRef("pk")
    )
    rows = list(
        Message.objects.filter(
            direction=Direction.REQUEST, sender__isnull=False, target__isnull=False
        )
        .annotate(continues=Exists(earlier))
        .select_related("sender", "target", "task")
        .order_by("-created_at", "-pk")[:last]
    )
    rows.reverse()
    by_skill: dict[str, tuple[str, ...]] = {}
    skills_of: dict[str, list[str]] = {}
    for skill_id, slug in Skill.objects.order_by("agent__slug").values_list(
        "skill_id", "agent__slug"
    ):
        by_skill[skill_id] = (*by_skill.get(skill_id, ()), slug)
        skills_of.setdefault(slug, []).append(skill_id)
    agents = {}
    ids = {pk for row in rows for pk in (row.sender_id, row.target_id) if pk is not None}
    for agent in Agent.objects.filter(pk__in=ids):
        agents[agent.slug] = agent_state(agent, skills_of.get(agent.slug, ()))
    counts: dict[str, int] = {}
    report = DryRun(messages=len(rows))
    for row in rows:
        assert row.sender is not None and row.target is not None
        task = row.task
        facts = Facts(
            caller=row.sender.slug,
            target=row.target.slug,
            kind=row.kind,
            skill=task.skill if task else "",
            priority=str((row.envelope or {}).get("priority", "normal")),
            chain=tuple(task.path[:-1]) if task and task.path else (row.sender.slug,),
            new_task=task is None or not row.continues,
        )
        window = Windows.at(row.created_at.timestamp(), facts.caller, facts.target)
        usage = Usage(
            minute=counts.get(window.caller_minute, 0),
            hour=counts.get(window.caller_hour, 0),
            target_minute=counts.get(window.target_minute, 0),
            minute_resets_in=window.minute_resets_in,
            hour_resets_in=window.hour_resets_in,
        )
        decision = decide(facts, Context(agents=agents, usage=usage, by_skill=by_skill), draft)
        if decision.action != "reject":
            for key in (window.caller_minute, window.caller_hour, window.target_minute):
                counts[key] = counts.get(key, 0) + 1
        if decision.action == row.decision:
            continue
        report.changed += 1
        transition = f"{row.decision} -> {decision.action}"
        report.transitions[transition] = report.transitions.get(transition, 0) + 1
        report.reasons[decision.reason] = report.reasons.get(decision.reason, 0) + 1
        if len(report.examples) < examples:
            report.examples.append(
                {
                    "messagePk": row.pk,
                    "at": row.created_at.isoformat(),
                    "caller": facts.caller,
                    "target": facts.target,
                    "kind": row.kind,
                    "before": f"{row.decision} ({row.decision_reason})",
                    "after": f"{decision.action} ({decision.reason})",
                    "detail": decision.detail,
                }
            )
    report.notes.append(
        "agents are judged as they are now; concurrency limits and breakers are not replayed"
    )
    return report
