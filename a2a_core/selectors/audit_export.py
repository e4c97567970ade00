"""Exports of the audit: the message log as JSON lines, and tasks as training examples, read
`EXPORT_CHUNK` messages at a time in the order of `audit_page`'s keyset."""

from __future__ import annotations

import functools
import operator
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.db.models import (
    BooleanField,
    Count,
    ExpressionWrapper,
    Q,
)

from a2a_core.errors import ValidationFailed
from a2a_core.models import (
    TERMINAL_STATES,
    Artifact,
    Decision,
    Escalation,
    Message,
    Task,
    TaskEvent,
    TaskState,
)
from a2a_core.schemas.a2a import text_of
from a2a_core.schemas.envelopes import envelope_files, parse_envelope
from a2a_core.selectors.audit import (
    AuditFilter,
    Position,
    beyond,
    filter_conditions,
    matching,
    walk,
)
from a2a_core.selectors.deciders import DecisionRef, deciders
from a2a_core.selectors.edit_diffs import edits_of_messages
from a2a_core.selectors.task_wire import iso

# Exports read this many messages per query, so no export ever holds more in memory.
EXPORT_CHUNK = 1_000


def _files(envelope: dict[str, Any] | None) -> list[str]:
    if not envelope:
        return []
    try:
        return envelope_files(parse_envelope(envelope))
    except ValidationFailed:
        return []


def _sender(slug: str | None, username: str | None) -> str | None:
    """Who spoke: an agent's slug, or `human:<username>` for a person answering through the hub."""
    if slug:
        return slug
    return f"human:{username}" if username else None


_LOG_FIELDS = (
    "pk",
    "message_id",
    "created_at",
    "sender__slug",
    "author__username",
    "target__slug",
    "recipients",
    "kind",
    "summary",
    "envelope",
    "responded_at",
    "latency_ms",
    "decision",
    "decision_reason",
    "decision_detail",
    "decision_policy_version",
    "task_id",
    "context_id",
)


def _log_line(row: Mapping[str, Any], decided_by: str = "") -> dict[str, Any]:
    """A message as one line of the A2A traffic log (seed 000's schema, plus the hub's ids),
    with who made its decision (`decided_by`: a person, or "policy v3 by alice")."""
    decision = {
        "action": row["decision"],
        "reason": row["decision_reason"],
        "detail": row["decision_detail"],
        # Who made it: the policy version that decided (None: not recorded), and a person's
        # name or "policy v3 by alice" (None: the record does not say).
        "policyVersion": row["decision_policy_version"],
        "decidedBy": decided_by or None,
    }
    return {
        "timestamp": iso(row["created_at"]),
        "from": _sender(row["sender__slug"], row["author__username"]),
        "to": row["target__slug"] or ",".join(row["recipients"] or []),
        "type": row["kind"],
        "messageSummary": row["summary"],
        "files": _files(row["envelope"]),
        "responseReceived": row["responded_at"] is not None,
        "latencyMs": row["latency_ms"],
        "policyDecision": decision,
        # The same object under its earlier name (the audit log's format in seed 000), kept
        # so that readers of older exports go on working; docs/audit.md says which to use.
        "coordinatorAction": decision,
        "messageId": row["message_id"],
        "taskId": row["task_id"],
        "contextId": row["context_id"] or None,
    }


def _log_entries(
    positions: list[tuple[datetime, int, bool]],
) -> list[tuple[Position, dict[str, Any]]]:
    rows = {
        row["pk"]: row
        for row in Message.objects.filter(pk__in=[p for _, p, _ in positions]).values(*_LOG_FIELDS)
    }
    # A message a person edited before approving it carries the original and the diff.
    edits = edits_of_messages(
        pk for pk, row in rows.items() if row["decision_reason"] == "approved_by_human"
    )
    who = deciders(
        DecisionRef(
            pk,
            row["decision_reason"],
            row["decision_policy_version"],
            row["author__username"] or "",
            row["decision_detail"],
        )
        for pk, row in rows.items()
    )
    lines = []
    for moment, pk, _ in positions:
        if pk in rows:
            line = _log_line(rows[pk], who.get(pk, ""))
            if pk in edits:
                line["edit"] = edits[pk].as_json()
            lines.append(((moment, pk), line))
    return lines


def audit_log_chunk(
    *, filters: AuditFilter, after: Position | None, size: int = EXPORT_CHUNK
) -> tuple[list[dict[str, Any]], Position | None]:
    """The next `size` filtered messages after `after` as log lines, oldest first, and where
    the next chunk starts (None: this was the last)."""
    positions = walk(matching(filters, text=True), after, newer=True, size=size)
    if not positions:
        return [], None
    lines = [line for _, line in _log_entries(positions)]
    onward = positions[-1][:2] if len(positions) == size else None
    return lines, onward


def audit_log_since(
    *, filters: AuditFilter, after: Position | None, size: int = EXPORT_CHUNK
) -> list[tuple[Position, dict[str, Any]]]:
    """Up to `size` filtered messages after `after` (all of them from the start when None),
    oldest first, each with its position, as log lines."""
    return _log_entries(walk(matching(filters, text=True), after, newer=True, size=size))


def audit_log_tail(*, filters: AuditFilter, size: int) -> list[tuple[Position, dict[str, Any]]]:
    """The `size` newest filtered messages, oldest first, each with its position."""
    newest = walk(matching(filters, text=True), None, newer=False, size=size)
    return _log_entries(list(reversed(newest)))


def audit_count(*, filters: AuditFilter) -> int:
    """How many messages the filters match (for an export's progress)."""
    conditions = filter_conditions(filters, text=True)
    return Message.objects.filter(functools.reduce(operator.or_, conditions)).count()


def _parts_data(parts: list[Any]) -> list[Any]:
    return [p["data"] for p in parts if isinstance(p, dict) and "data" in p]


def _turn(row: Mapping[str, Any]) -> dict[str, Any]:
    parts = row["parts"] or []
    return {
        "role": row["role"],
        "from": _sender(row["sender__slug"], row["author__username"]),
        "text": text_of(parts),
        "data": _parts_data(parts),
    }


_TASK_FIELDS = (
    "pk",
    "context_id",
    "state",
    "reason",
    "skill",
    "parent_id",
    "depth",
    "created_at",
    "status_timestamp",
    "target__slug",
    "caller__slug",
)


def _training_examples(task_ids: list[str]) -> list[dict[str, Any]]:
    """Each task's conversation, outcome and quality signals (seed 003 UC-6), in `task_ids`
    order."""
    tasks = {row["pk"]: row for row in Task.objects.filter(pk__in=task_ids).values(*_TASK_FIELDS)}
    ids = list(tasks)
    turns: dict[str, list[dict[str, Any]]] = {pk: [] for pk in ids}
    for row in (
        Message.objects.filter(task_id__in=ids)
        .exclude(decision=Decision.REJECT)
        .order_by("task_id", "created_at", "pk")
        .values("task_id", "role", "parts", "sender__slug", "author__username")
    ):
        turns[row["task_id"]].append(_turn(row))
    artifacts: dict[str, list[dict[str, Any]]] = {pk: [] for pk in ids}
    for task_id, name, parts in (
        Artifact.objects.filter(task_id__in=ids)
        .order_by("created_at", "pk")
        .values_list("task_id", "name", "parts")
    ):
        artifacts[task_id].append(
            {"name": name, "text": text_of(parts), "data": _parts_data(parts)}
        )
    escalations = dict(
        Escalation.objects.filter(task_id__in=ids)
        .values("task_id")
        .annotate(n=Count("pk"))
        .values_list("task_id", "n")
    )
    interrupted = set(
        TaskEvent.objects.filter(
            task_id__in=ids, state__in=[TaskState.INPUT_REQUIRED, TaskState.AUTH_REQUIRED]
        ).values_list("task_id", flat=True)
    )
    examples = []
    for pk in task_ids:
        if (task := tasks.get(pk)) is None:
            continue
        duration = task["status_timestamp"] - task["created_at"]
        examples.append(
            {
                "taskId": pk,
                "contextId": task["context_id"],
                "messages": turns[pk],
                "outcome": {
                    "state": task["state"],
                    "error": (task["reason"] or None)
                    if task["state"] in (TaskState.FAILED, TaskState.REJECTED, TaskState.CANCELED)
                    else None,
                    "artifacts": artifacts[pk],
                },
                "metadata": {
                    "agent": task["target__slug"],
                    "caller": task["caller__slug"],
                    "skill": task["skill"],
                    "successful": task["state"] == TaskState.COMPLETED,
                    "durationMs": round(duration.total_seconds() * 1000)
                    if task["state"] in TERMINAL_STATES
                    else None,
                    "requiredHumanInput": pk in interrupted or pk in escalations,
                    "escalationCount": escalations.get(pk, 0),
                    "parentTaskId": task["parent_id"],
                    "depth": task["depth"],
                    "createdAt": iso(task["created_at"]),
                },
            }
        )
    return examples


def training_chunk(
    *, filters: AuditFilter, after: Position | None, size: int = EXPORT_CHUNK
) -> tuple[list[dict[str, Any]], Position | None]:
    """Training examples for the tasks whose first filtered message is among the next `size`
    filtered messages after `after` (so each task comes once, in the order its conversation
    started), and where the next chunk starts (None: this was the last)."""
    conditions = [where & Q(task__isnull=False) for where in filter_conditions(filters, text=True)]
    positions = walk(
        [Message.objects.filter(where) for where in conditions], after, newer=True, size=size
    )
    if not positions:
        return [], None
    task_of = dict(
        Message.objects.filter(pk__in=[pk for _, pk, _ in positions]).values_list("pk", "task_id")
    )
    candidates = list(dict.fromkeys(task_of[pk] for _, pk, _ in positions if pk in task_of))
    onward = positions[-1][:2] if len(positions) == size else None
    seen = _started_before(candidates, positions[0][:2], conditions)
    return _training_examples([pk for pk in candidates if pk not in seen]), onward


def _started_before(task_ids: list[str], position: Position, conditions: list[Q]) -> set[str]:
    """The tasks among `task_ids` with a filtered message before `position` (exported then).

    Their earlier messages come from the task index; the filters are then evaluated on those
    rows alone, as a selected value: in a WHERE clause they would tempt the database into
    walking the kind or decision index through every older message instead.
    """
    earlier = list(
        beyond(Message.objects.filter(task_id__in=task_ids), position, newer=False).values_list(
            "pk", flat=True
        )
    )
    matches = ExpressionWrapper(functools.reduce(operator.or_, conditions), BooleanField())
    seen: set[str] = set()
    for start in range(0, len(earlier), EXPORT_CHUNK):
        rows = Message.objects.filter(pk__in=earlier[start : start + EXPORT_CHUNK])
        seen.update(
            task_id
            for task_id, hit in rows.annotate(hit=matches).values_list("task_id", "hit")
            if hit
        )
    return seen
