"""Dry-run: a draft policy against recorded traffic, before anyone publishes it.

The recorded requests are replayed twice, once through the current policy and once through the
draft, each replay keeping its own rate windows; the state neither policy decides (which agents
were offline or suspended, which breakers were open, the delegation chain, tasks in flight) is
reconstructed from the record and shared by both. Only where the two replays disagree is
reported, so a draft equal to the current policy changes nothing — whatever the record says.

Content rules are replayed on what the hub stored: a held message's sealed original, else its
parts as recorded, whose `[redacted: <kind>]` marks count as what was found there. Besides
the changes, the report counts each of the draft's content rules' holds, redactions and
rejections over the same requests and over the agents' answers to them.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from django.db.models import Exists, OuterRef, Q

from a2a_core.errors import FieldProblem, ValidationFailed
from a2a_core.models import Agent, Direction, Message, Skill, Task
from a2a_core.models.task import TERMINAL_STATES
from a2a_core.policy.compiled import CompiledPolicy
from a2a_core.policy.content import content_scan, content_verdict
from a2a_core.policy.decide import (
    AgentState,
    BreakerView,
    Context,
    Decision,
    Facts,
    Usage,
    decide,
)
from a2a_core.schemas.policy import parse_policy
from a2a_core.sealed import SealBroken, unseal
from a2a_core.services.policy import policy_active
from a2a_core.storage.policy_state import Windows

OPEN = BreakerView("open", retry_after=1.0)


@dataclass
class DryRun:
    """Where a draft policy would decide recorded messages differently from the current one."""

    messages: int = 0
    changed: int = 0
    # "deliver -> reject" (current -> draft) -> count
    transitions: dict[str, int] = field(default_factory=dict)
    # the draft's reason for each changed decision -> count
    reasons: dict[str, int] = field(default_factory=dict)
    # "caller -> target" -> count of changed decisions
    pairs: dict[str, int] = field(default_factory=dict)
    examples: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # the draft's content rules: rule name -> {"hold" | "redact" | "reject": count}
    content: dict[str, dict[str, int]] = field(default_factory=dict)

    def count_content(self, rule: str, action: str) -> None:
        counts = self.content.setdefault(rule, {})
        counts[action] = counts.get(action, 0) + 1

    def as_dict(self) -> dict[str, Any]:
        return {
            "content": self.content,
            "messages": self.messages,
            "changed": self.changed,
            "transitions": self.transitions,
            "reasons": self.reasons,
            "pairs": self.pairs,
            "examples": self.examples,
            "notes": self.notes,
        }


class _Replay:
    """One policy's pass over the record: its own rate-limit windows."""

    def __init__(self, policy: CompiledPolicy) -> None:
        self.policy = policy
        self.counts: dict[str, int] = {}

    def decide(
        self, facts: Facts, ctx: Context, window: Windows, inflight: int, document: Any = None
    ) -> Decision:
        if document is not None:
            facts = replace(facts, content=self.scan(facts, document))
        usage = Usage(
            minute=self.counts.get(window.caller_minute, 0),
            hour=self.counts.get(window.caller_hour, 0),
            inflight=inflight,
            target_minute=self.counts.get(window.target_minute, 0),
            minute_resets_in=window.minute_resets_in,
            hour_resets_in=window.hour_resets_in,
        )
        decision = decide(facts, replace(ctx, usage=usage), self.policy)
        if decision.action != "reject":
            for key in (window.caller_minute, window.caller_hour, window.target_minute):
                self.counts[key] = self.counts.get(key, 0) + 1
        return decision

    def scan(self, facts: Facts, document: dict[str, Any]) -> tuple[Any, ...]:
        return content_scan(
            document,
            self.policy.content,
            direction="request",
            caller=facts.caller,
            target=facts.target,
            kind=facts.kind,
            skill=facts.skill,
            recorded=True,
        )


def _as_sent(row: Message) -> dict[str, Any]:
    """A recorded request as the replay scans it: a held message's sealed original, else its
    parts as stored."""
    if row.sealed_parts:
        try:
            return {"parts": unseal(row.sealed_parts)["parts"]}
        except SealBroken:
            pass
    return {"parts": row.parts}


def _count_content(report: DryRun, decision: Decision) -> None:
    """The draft's content rules behind its decision on one request."""
    if decision.reason in ("content_rejected", "content_held"):
        rule = decision.content[0].rule if decision.content else ""
        report.count_content(rule, "reject" if decision.action == "reject" else "hold")
    elif decision.action != "reject":
        for rule in dict.fromkeys(f.rule for f in decision.content):
            report.count_content(rule, "redact")


def _count_answers(report: DryRun, draft: CompiledPolicy, rows: Sequence[Message]) -> None:
    """The draft's answer rules over the agents' answers on the replayed requests' tasks."""
    if not any(rule.direction != "request" for rule in draft.content.rules):
        return
    tasks = {row.task_id for row in rows if row.task_id}
    answers = Message.objects.filter(direction=Direction.REPLY, task_id__in=tasks).select_related(
        "task"
    )
    for answer in answers.iterator():
        task = answer.task
        path = task.path if task is not None else []
        scope: dict[str, Any] = {
            "direction": "answer",
            "caller": path[-2] if len(path) > 1 else "",
            "target": path[-1] if path else "",
            "kind": "response",
            "skill": task.skill if task is not None else "",
        }
        hits = content_scan({"parts": answer.parts}, draft.content, recorded=True, **scope)
        verdict = content_verdict(hits, draft.content, **scope)
        if verdict.action == "reject":
            report.count_content(verdict.rule, "reject")
        elif verdict.action is not None:
            for rule in dict.fromkeys(f.rule for f in verdict.findings):
                report.count_content(rule, "redact")


class _InFlight:
    """Tasks each caller had in flight at a moment, from the tasks' start and end times."""

    def __init__(self, tasks: Iterable[tuple[str, float, float | None]]) -> None:
        self.started: dict[str, list[float]] = {}
        self.ended: dict[str, list[float]] = {}
        for caller, started, ended in tasks:
            self.started.setdefault(caller, []).append(started)
            if ended is not None:
                self.ended.setdefault(caller, []).append(ended)
        for times in (*self.started.values(), *self.ended.values()):
            times.sort()

    def at(self, caller: str, moment: float) -> int:
        # Strictly before `moment`: the message being judged has not started its task yet.
        started = bisect_right(self.started.get(caller, []), moment - 1e-6)
        ended = bisect_right(self.ended.get(caller, []), moment)
        return max(0, started - ended)


def _chains(rows: Sequence[Message]) -> dict[int, tuple[str, ...]]:
    """The delegation chain of each refused new task (stored without a task): the path of the
    task its caller was working on in the same trace when it called."""
    orphans = [row for row in rows if row.task is None and row.trace_id and row.hop > 1]
    if not orphans:
        return {}
    working: dict[tuple[str, int], list[tuple[float, list[str]]]] = {}
    for trace_id, target_id, created, path in Task.objects.filter(
        trace_id__in={row.trace_id for row in orphans}
    ).values_list("trace_id", "target_id", "created_at", "path"):
        working.setdefault((trace_id, target_id), []).append((created.timestamp(), path))
    chains = {}
    for row in orphans:
        assert row.sender_id is not None
        before = [
            path
            for created, path in sorted(working.get((row.trace_id, row.sender_id), []))
            if created <= row.created_at.timestamp()
        ]
        if before:
            chains[row.pk] = tuple(before[-1])
    return chains


def _task_times(rows: Sequence[Message]) -> list[tuple[str, float, float | None]]:
    """(caller, started, ended or None) of the tasks the replayed callers had open in the
    replayed span."""
    if not rows:
        return []
    ended = [str(state) for state in TERMINAL_STATES]
    return [
        (caller, created.timestamp(), last.timestamp() if state in ended else None)
        for caller, created, last, state in Task.objects.filter(
            Q(status_timestamp__gte=rows[0].created_at) | ~Q(state__in=ended),
            caller__slug__in={row.sender.slug for row in rows if row.sender is not None},
            created_at__lte=rows[-1].created_at,
        ).values_list("caller__slug", "created_at", "status_timestamp", "state")
    ]


def _as_recorded(
    agents: dict[str, AgentState], facts: Facts, reason: str
) -> dict[str, AgentState] | None:
    """The agents as the record says they were, where it says more than their state now."""
    status = {
        "caller_suspended": (facts.caller, "suspended"),
        "target_suspended": (facts.target, "suspended"),
        "target_offline": (facts.target, "offline"),
    }.get(reason)
    if status is None:
        return None
    slug, state = status
    if slug not in agents:
        return None
    return {**agents, slug: replace(agents[slug], status=state)}


def policy_dry_run(*, document: Any, last: int = 1000, examples: int = 20) -> DryRun:
    """Replay the last `last` requests through the current policy and through the draft
    `document` (validated first), under the same reconstructed state, and report every message
    the two decide differently. Agents are taken as online unless the record says otherwise;
    a breaker is open where the record refused a message with `circuit_open`."""
    draft = CompiledPolicy(parse_policy(document))
    if not 1 <= last <= 100_000:
        raise ValidationFailed(
            "invalid dry-run size", [FieldProblem("last", "between 1 and 100,000")]
        )
    current = CompiledPolicy(policy_active())
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
    agents = {
        agent.slug: AgentState(
            agent.slug,
            "online",
            agent.delivery_mode == "inbox",
            frozenset(skills_of.get(agent.slug, ())),
        )
        for agent in Agent.objects.all()
    }
    chains = _chains(rows)
    inflight = _InFlight(_task_times(rows))
    before, after = _Replay(current), _Replay(draft)
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
            chain=tuple(task.path[:-1])
            if task and task.path
            else chains.get(row.pk, (row.sender.slug,)),
            new_task=task is None or not row.continues,
        )
        moment = row.created_at.timestamp()
        window = Windows.at(moment, facts.caller, facts.target)
        ctx = Context(
            agents=_as_recorded(agents, facts, row.decision_reason) or agents,
            breakers={facts.target: OPEN} if row.decision_reason == "circuit_open" else {},
            by_skill=by_skill,
        )
        busy = inflight.at(facts.caller, moment)
        sent = _as_sent(row) if current.content.rules or draft.content.rules else None
        was = before.decide(facts, ctx, window, busy, sent)
        will = after.decide(facts, ctx, window, busy, sent)
        _count_content(report, will)
        if (was.action, was.reason, was.target) == (will.action, will.reason, will.target):
            continue
        report.changed += 1
        transition = f"{was.action} -> {will.action}"
        report.transitions[transition] = report.transitions.get(transition, 0) + 1
        report.reasons[will.reason] = report.reasons.get(will.reason, 0) + 1
        pair = f"{facts.caller} → {facts.target}"
        report.pairs[pair] = report.pairs.get(pair, 0) + 1
        if len(report.examples) < examples:
            report.examples.append(
                {
                    "messagePk": row.pk,
                    "at": row.created_at.isoformat(),
                    "caller": facts.caller,
                    "target": facts.target,
                    "kind": row.kind,
                    "summary": row.summary,
                    "recorded": f"{row.decision} ({row.decision_reason})",
                    "before": f"{was.action} ({was.reason})",
                    "after": f"{will.action} ({will.reason})",
                    "detail": will.detail,
                }
            )
    _count_answers(report, draft, rows)
    report.notes.append(
        "both policies see the same reconstructed state: agents online unless the record says "
        "otherwise, breakers open where it refused with circuit_open; inbox queue sizes are "
        "not replayed"
    )
    return report
