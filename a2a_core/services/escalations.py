"""Held messages and questions waiting for a human: creating them and deciding them.

A message the policy holds leaves its task in `auth-required` (an interrupted state: a
blocking caller gets its answer at once) with an approval escalation. A human approves it
(optionally editing it first), redirects it to another agent, or rejects it with a reason;
when nobody decides before the deadline the rule's timeout outcome applies. Approved and
redirected messages are queued: a server process delivers them (see delivery/outbox.py).
Every decision is an audit event and announced on the `escalations` group.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from a2a_core import agent_cache
from a2a_core.errors import Conflict, FieldProblem, NotFound, ValidationFailed
from a2a_core.events import publish_many_on_commit, publish_traffic_on_commit
from a2a_core.models import (
    PRIORITY_RANK,
    Agent,
    DeliveryState,
    Direction,
    Escalation,
    EscalationKind,
    EscalationStatus,
    Message,
    NotifyEvent,
    Task,
    TaskState,
)
from a2a_core.models import Decision as Verdict
from a2a_core.models.task import new_id
from a2a_core.policy.decide import Decision
from a2a_core.schemas.a2a import text_of
from a2a_core.schemas.envelope_form import json_diff
from a2a_core.schemas.envelopes import ENVELOPE_MEDIA_TYPE, envelope_summary, parse_envelope
from a2a_core.schemas.events import OutboxQueued
from a2a_core.schemas.json_schema import schema_problems
from a2a_core.services.audit import audit_record
from a2a_core.services.classify import message_item
from a2a_core.services.ledger import ledger_decisions
from a2a_core.services.message_edits import canonical_parts, edited_parts
from a2a_core.services.message_edits import human_text as _text
from a2a_core.services.notify import notify_queue
from a2a_core.services.questions import announce_escalation, escalation_deadline
from a2a_core.services.task_states import task_set_state


def _agent_says(task: Task, text: str) -> dict[str, Any]:
    return {
        "messageId": new_id(),
        "role": "ROLE_AGENT",
        "parts": [{"text": text}],
        "taskId": task.pk,
        "contextId": task.context_id,
    }


def _set_state(
    task: Task, state: str, text: str, *, reason: str = "", also_save: Sequence[str] = ()
) -> None:
    """Move a locked task to `state` with a status message from the hub."""
    task_set_state(
        task,
        state,
        status_message=_agent_says(task, text),
        reason=reason or text,
        also_save=also_save,
    )


def held_fingerprint(*, caller: Agent, message: Message) -> str:
    """Same caller, same target, same content: the same fingerprint (the inbox folds them)."""
    content = json.dumps(
        [caller.pk, message.target_id, message.parts, message.envelope],
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(content.encode()).hexdigest()


def escalation_hold(
    *, task: Task, message: Message, decision: Decision, caller: Agent
) -> Escalation:
    """Hold a just-recorded message for a human (call in the transaction that recorded it)."""
    rule = decision.approval
    deadline = escalation_deadline(
        slug=caller.slug, seconds=rule.deadline_seconds if rule is not None else None
    )
    priority = (message.envelope or {}).get("priority", "normal")
    escalation = Escalation.objects.create(
        kind=EscalationKind.APPROVAL,
        priority=priority,
        priority_rank=PRIORITY_RANK.get(priority, 1),
        task=task,
        message=message,
        agent=caller,
        question=message.summary,
        reason=decision.detail[:500],
        deadline=deadline,
        timeout_outcome=rule.timeout_outcome if rule is not None else "reject",
        fingerprint=held_fingerprint(caller=caller, message=message),
    )
    _set_state(
        task,
        TaskState.AUTH_REQUIRED,
        f"held for approval ({decision.detail}); an operator decides before "
        f"{deadline.strftime('%Y-%m-%d %H:%M:%S')} UTC",
    )
    announce_escalation(escalation, "escalation.opened")
    notify_queue(escalation=escalation, event=NotifyEvent.ARRIVED)
    return escalation


def open_any(escalation_id: int) -> Escalation:
    """A pending escalation of either kind, locked (NotFound, or Conflict once decided)."""
    escalation = (
        Escalation.objects.select_for_update(of=("self",))
        .select_related("agent")
        .filter(pk=escalation_id)
        .first()
    )
    if escalation is None:
        raise NotFound(f"there is no escalation {escalation_id}")
    if escalation.status != EscalationStatus.PENDING:
        raise Conflict(
            f"escalation {escalation_id} was already {escalation.status} by {escalation.decider}",
            details={"status": escalation.status},
        )
    return escalation


# The name decisions made by a deadline are recorded under (see `a2a_core.services.escalation_expiry`).
DEADLINE = "deadline"


def claim_holds(escalation: Escalation, who: str) -> None:
    """Under HUB_ESCALATION_CLAIMS=hold, only the person who claimed an escalation decides it
    (another takes the claim over first): Conflict for anyone else."""
    holder = escalation.claimed_by_name
    if settings.HUB_ESCALATION_CLAIMS == "hold" and holder and holder != who:
        raise Conflict(
            f"escalation {escalation.pk} is claimed by {holder}: only they decide it, "
            "unless you take it over",
            details={"claimedBy": holder},
        )


def _open(
    escalation_id: int, kind: str = EscalationKind.APPROVAL, who: str | None = None
) -> Escalation:
    escalation = (
        Escalation.objects.select_for_update(of=("self",))
        .select_related("task", "message", "agent")
        .filter(pk=escalation_id)
        .first()
    )
    if escalation is None:
        raise NotFound(f"there is no escalation {escalation_id}")
    if escalation.kind != kind:
        raise Conflict(f"escalation {escalation_id} is an {escalation.kind} escalation")
    if escalation.status != EscalationStatus.PENDING:
        raise Conflict(
            f"escalation {escalation_id} was already {escalation.status} by {escalation.decider}",
            details={"status": escalation.status},
        )
    if who is not None and who != DEADLINE:
        claim_holds(escalation, who)
    # Lock the task too: a decision changes it.
    escalation.task = Task.objects.select_for_update().get(pk=escalation.task_id)
    return escalation


def who_acts(actor: User | None, actor_label: str) -> str:
    """The name a decision is shown under: the user's, else the label given (a CLI's user)."""
    if actor is not None and actor.is_authenticated:
        return actor.get_username()
    return actor_label or "the hub"


def _decided(
    escalation: Escalation, status: str, actor: User | None, who: str, **fields: Any
) -> None:
    escalation.status = status
    escalation.decided_by = actor if actor is not None and actor.is_authenticated else None
    escalation.decided_by_name = who[:150]
    escalation.decided_at = timezone.now()
    escalation.claimed_by_name = ""
    escalation.claimed_at = None
    for name, value in fields.items():
        setattr(escalation, name, value)
    escalation.save()
    announce_escalation(escalation, "escalation.decided")
    if escalation.message_id is not None:
        # The held message's row in the live feed shows the decision, as a reload does.
        message = Message.objects.get(pk=escalation.message_id)
        publish_traffic_on_commit([message_item(message, escalation.task, decided=True)], {})


def _stamp() -> str:
    return timezone.now().strftime("%Y-%m-%d %H:%M:%S UTC")


def _queue(message: Message) -> None:
    """Queue a message for the outbox; its task gets a fresh deadline for the delivery."""
    message.delivery_state = DeliveryState.QUEUED
    message.save(update_fields=["delivery_state", "decision", "decision_reason", "decision_detail"])
    ledger_decisions([message])
    deadline = timezone.now() + timedelta(seconds=settings.HUB_FORWARD_TIMEOUT)
    Task.objects.filter(pk=message.task_id, deadline__isnull=False).update(deadline=deadline)
    publish_many_on_commit([("outbox", OutboxQueued(message_pk=message.pk))])


@transaction.atomic
def escalation_answer(
    *,
    escalation_id: int,
    text: str,
    data: Any = None,
    actor: User | None = None,
    actor_label: str = "",
) -> Escalation:
    """A human answers an agent's question: the answer goes to the agent as the next message
    on its task, which moves back to working.

    When the agent declared an answer schema, `data` (a decoded JSON value) is required and
    must fit it; it travels as a data part after the text.
    """
    text = _text(text, "text")
    if not text:
        raise ValidationFailed("the answer is empty", [FieldProblem("text", "write the answer")])
    escalation = _open(
        escalation_id, EscalationKind.INPUT_REQUIRED, who=who_acts(actor, actor_label)
    )
    if escalation.answer_schema is not None:
        if data is None:
            raise ValidationFailed(
                "structured data is required",
                [
                    FieldProblem(
                        "data", f"{escalation.agent.slug} asked for data fitting its schema"
                    )
                ],
            )
        if problems := schema_problems(data, escalation.answer_schema):
            raise ValidationFailed("the data does not fit the schema", problems)
    task = escalation.task
    if task.state != TaskState.INPUT_REQUIRED:
        raise Conflict(
            f"task {task.pk} is {task.state}: it no longer waits for an answer",
            details={"taskId": task.pk, "state": task.state},
        )
    who = who_acts(actor, actor_label)
    parts: list[dict[str, Any]] = [{"text": text}]
    if data is not None:
        parts.append({"data": data, "mediaType": "application/json"})
    message = Message.objects.create(
        message_id=new_id(),
        role="user",
        parts=parts,
        direction=Direction.REQUEST,
        kind="response",
        summary=text[:200],
        author=actor if actor is not None and actor.is_authenticated else None,
        target_id=task.target_id,
        recipients=[escalation.agent.slug],
        task=task,
        context_id=task.context_id,
        hop=task.depth + 1,
        trace_id=task.trace_id,
        decision=Verdict.DELIVER,
        decision_reason="answered_by_human",
        decision_detail=f"answered by {who} at {_stamp()}",
    )
    _set_state(task, TaskState.WORKING, f"answered by {who}; delivering")
    _queue(message)
    _decided(escalation, EscalationStatus.ANSWERED, actor, who, answer=text, answer_data=data)
    audit_record(
        action="escalation.answer",
        summary=f"answered {escalation.agent.slug}'s question on task {task.pk}",
        actor=actor,
        actor_label=actor_label,
        agent=escalation.agent,
        object_type="escalation",
        object_id=escalation.pk,
        data={"data": data} if data is not None else None,
    )
    return escalation


@transaction.atomic
def escalation_approve(
    *,
    escalation_id: int,
    actor: User | None = None,
    actor_label: str = "",
    edited_text: str | None = None,
    edits: dict[int, Any] | None = None,
) -> Escalation:
    """Let a held message through, after editing it if asked: `edited_text` replaces all its
    text; `edits` replaces single parts (see `_edited_parts`: a text, or the typed envelope).
    The agent receives the message as edited; the audit event keeps the original parts and
    a diff of what changed. Nothing changes when an edit is not valid."""
    escalation = _open(escalation_id, who=who_acts(actor, actor_label))
    message = escalation.message
    assert message is not None
    data: dict[str, Any] = {}
    if edited_text is not None:
        edited_text = _text(edited_text, "text")
        if not edited_text:
            raise ValidationFailed(
                "the edited message is empty", [FieldProblem("text", "write the message to send")]
            )
        new_parts = [*[p for p in message.parts if "text" not in p], {"text": edited_text}]
    elif edits:
        new_parts = edited_parts(message.parts, edits)
    else:
        new_parts = message.parts
    if new_parts != message.parts:
        data = {
            "originalParts": message.parts,
            "diff": json_diff({"parts": canonical_parts(message.parts)}, {"parts": new_parts}),
        }
        message.parts = new_parts
        envelopes = [p["data"] for p in new_parts if p.get("mediaType") == ENVELOPE_MEDIA_TYPE]
        if envelopes:
            message.envelope = envelopes[0]
            message.summary = envelope_summary(parse_envelope(envelopes[0]))
        else:
            message.summary = (text_of(new_parts) or message.summary)[:200]
        # The human sent what they wrote: a content rule's sealed original no longer goes.
        message.sealed_parts = ""
        message.save(update_fields=["parts", "envelope", "summary", "sealed_parts"])
    edited = bool(data)
    who = who_acts(actor, actor_label)
    _set_state(escalation.task, TaskState.WORKING, f"approved by {who}; delivering")
    message.decision = Verdict.DELIVER
    message.decision_reason = "approved_by_human"
    message.decision_detail = f"approved by {who} at {_stamp()}" + (", edited" if edited else "")
    _queue(message)
    _decided(
        escalation,
        EscalationStatus.APPROVED,
        actor,
        who,
        answer=edited_text or (message.summary if edited else ""),
        answer_data=data or None,
    )
    audit_record(
        action="escalation.edit_approve" if edited else "escalation.approve",
        summary=f"approved held message {message.message_id} from {escalation.agent.slug}"
        + (" after editing it" if edited else ""),
        actor=actor,
        actor_label=actor_label,
        agent=escalation.agent,
        object_type="escalation",
        object_id=escalation.pk,
        data=data,
    )
    return escalation


@transaction.atomic
def escalation_redirect(
    *, escalation_id: int, to: str, actor: User | None = None, actor_label: str = ""
) -> Escalation:
    """Send a held message to another agent instead."""
    escalation = _open(escalation_id, who=who_acts(actor, actor_label))
    message = escalation.message
    assert message is not None
    target = Agent.objects.filter(slug=to).first()
    if target is None:
        raise ValidationFailed(
            "unknown agent", [FieldProblem("to", f"no agent {to!r} is registered")]
        )
    if target.pk in (escalation.task.target_id, escalation.task.caller_id):
        raise ValidationFailed(
            "redirect elsewhere", [FieldProblem("to", f"{to} is already a party to this task")]
        )
    task = escalation.task
    task.target = target
    task.path = [*task.path[:-1], target.slug]
    message.redirected_to = target
    message.save(update_fields=["redirected_to"])
    who = who_acts(actor, actor_label)
    message.decision = Verdict.REDIRECT
    message.decision_reason = "redirected_by_human"
    message.decision_detail = f"redirected to {to} by {who} at {_stamp()}"
    _set_state(
        task,
        TaskState.WORKING,
        f"redirected to {to} by {who}; delivering",
        also_save=["target", "path"],
    )
    _queue(message)
    _decided(escalation, EscalationStatus.REDIRECTED, actor, who, answer=to)
    audit_record(
        action="escalation.redirect",
        summary=f"redirected held message {message.message_id} from {escalation.agent.slug} to {to}",
        actor=actor,
        actor_label=actor_label,
        agent=escalation.agent,
        object_type="escalation",
        object_id=escalation.pk,
        data={"to": to},
    )
    agent_cache.forget(slug=to)
    return escalation


@transaction.atomic
def escalation_reject(
    *, escalation_id: int, reason: str, actor: User | None = None, actor_label: str = ""
) -> Escalation:
    """Refuse a held message; the caller's task ends `rejected` with the reason."""
    reason = _text(reason, "reason")
    if not reason:
        raise ValidationFailed(
            "a reason is required", [FieldProblem("reason", "say why; the calling agent sees it")]
        )
    escalation = _open(escalation_id, who=who_acts(actor, actor_label))
    message = escalation.message
    assert message is not None
    who = who_acts(actor, actor_label)
    _set_state(escalation.task, TaskState.REJECTED, f"rejected by {who}: {reason}", reason=reason)
    # The decision stays `hold`: a retry of a refused message is judged anew, of a rejected
    # held one answered with its task (see Message's idempotency constraint).
    Message.objects.filter(pk=message.pk).update(
        delivery_state=DeliveryState.REJECTED,
        decision_reason="rejected_by_human",
        decision_detail=f"rejected by {who} at {_stamp()}: {reason}",
    )
    ledger_decisions([Message.objects.get(pk=message.pk)])
    _decided(escalation, EscalationStatus.REJECTED, actor, who, answer=reason)
    audit_record(
        action="escalation.reject",
        summary=f"rejected held message {message.message_id} from {escalation.agent.slug}: {reason}",
        actor=actor,
        actor_label=actor_label,
        agent=escalation.agent,
        object_type="escalation",
        object_id=escalation.pk,
        data={"reason": reason},
    )
    return escalation
