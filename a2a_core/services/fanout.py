"""Fan-out: one broadcast or knowledge share, many recipients, each judged and delivered alone.

An agent sends a `broadcast` (to a scope) or a `knowledge_share` (to the agents in
`relevantTo`) to the hub's own endpoint. The message is recorded once; each recipient gets its
own `Delivery` with its own policy decision. Inbox agents receive theirs in their inbox (queued
while offline); endpoint agents are sent theirs by the outbox, each on its own, retried with
backoff — so one slow or offline recipient holds up nobody else.

Broadcast scopes: `all`, `role:<role>`, `skill:<skill id>`, `tag:<tag>`, `agents:<a>,<b>,...`.
The sender never receives its own broadcast.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from a2a_core.errors import FieldProblem, HubError, ValidationFailed
from a2a_core.events import publish_many_on_commit, publish_traffic_on_commit
from a2a_core.models import (
    Agent,
    Decision,
    Delivery,
    DeliveryMode,
    DeliveryState,
    Direction,
    Message,
)
from a2a_core.models.task import new_id
from a2a_core.policy.decide import Facts
from a2a_core.schemas.a2a import envelope_part_indexes, hub_metadata
from a2a_core.schemas.events import FanOutQueued
from a2a_core.services.classify import classify, message_item, message_row
from a2a_core.services.content import fan_out_masked, masked_summary
from a2a_core.services.decisions import decide_batch, message_content
from a2a_core.services.digest import message_digest
from a2a_core.services.inbox import inbox_enqueue
from a2a_core.services.ledger import ledger_decisions
from a2a_core.traceparent import trace_id_of

FAN_OUT_KINDS = ("broadcast", "knowledge_share")
SCOPES = "all, role:<role>, skill:<skill id>, tag:<tag>, agents:<a>,<b>,..."


class NotFanOut(HubError):
    """A message sent to the hub itself that is not a broadcast or a knowledge share."""

    code = "not_fan_out"


@dataclass
class FanOutResult:
    message_id: str
    context_id: str
    # One per registered recipient: {"agent", "decision", "reason", "state"}
    deliveries: list[dict[str, Any]] = field(default_factory=list)
    # Names in relevantTo that are no registered agent.
    unknown: list[str] = field(default_factory=list)
    duplicate: bool = False
    # When the policy let nothing through: why (the first refusal).
    refusal: Any = None
    # The messageId of the hub's answer: the same for every retry of the message.
    answer_id: str = ""
    # The recorded message (0: none was, all refused) and its hub trace.
    message_pk: int = 0
    trace_id: str = ""

    def summary(self) -> str:
        sent = sum(1 for d in self.deliveries if d["decision"] != Decision.REJECT)
        text = f"sent to {sent} of {len(self.deliveries)} agents"
        refused = len(self.deliveries) - sent
        if refused:
            text += f"; {refused} refused by the policy"
        if self.unknown:
            text += f"; unknown: {', '.join(self.unknown)}"
        return text


def _payload_field(message: dict[str, Any], name: str) -> str:
    return f"message.parts[{envelope_part_indexes(message)[0]}].data.payload.{name}"


def _scope_recipients(scope: str, caller: Agent, where: str) -> list[Agent]:
    agents = Agent.objects.exclude(pk=caller.pk).order_by("slug")
    how, _, value = scope.partition(":")
    value = value.strip()
    if scope.strip() == "all":
        return list(agents)
    if how == "role" and value:
        return list(agents.filter(role__iexact=value))
    if how == "skill" and value:
        return list(agents.filter(skills__skill_id=value).distinct())
    if how == "tag" and value:
        return list(agents.filter(skills__tags__tag__iexact=value).distinct())
    if how == "agents" and value:
        return list(agents.filter(slug__in=[s.strip() for s in value.split(",") if s.strip()]))
    raise ValidationFailed(
        "invalid broadcast scope", [FieldProblem(where, f"got {scope!r}; valid: {SCOPES}")]
    )


def _recipients(
    kind: str, envelope: dict[str, Any], caller: Agent, message: dict[str, Any]
) -> tuple[list[Agent], list[str]]:
    payload = envelope.get("payload") or {}
    if kind == "broadcast":
        where = _payload_field(message, "scope")
        return _scope_recipients(str(payload.get("scope", "")), caller, where), []
    named = list(dict.fromkeys(payload.get("relevantTo") or []))
    where = _payload_field(message, "relevantTo")
    if not named:
        raise ValidationFailed(
            "nobody to share with",
            [FieldProblem(where, "name the agents it is relevant to (or send a broadcast)")],
        )
    found = {a.slug: a for a in Agent.objects.filter(slug__in=named).exclude(pk=caller.pk)}
    unknown = [slug for slug in named if slug not in found and slug != caller.slug]
    if not found:
        raise ValidationFailed(
            "nobody to share with",
            [FieldProblem(where, f"no registered agent among {', '.join(named)}")],
        )
    return [found[slug] for slug in named if slug in found], unknown


def _previous(caller: Agent, message_id: str, digest: str) -> FanOutResult | None:
    """The result of an earlier attempt with the same messageId and content (a retry changes
    nothing; the same messageId with other content is a new message)."""
    row = (
        Message.objects.filter(
            direction=Direction.REQUEST,
            sender=caller,
            message_id=message_id,
            digest=digest,
            task__isnull=True,
        )
        .exclude(decision=Decision.REJECT)
        .first()
    )
    if row is None:
        return None
    result = FanOutResult(
        row.message_id,
        row.context_id,
        duplicate=True,
        answer_id=_answer_id(row),
        message_pk=row.pk,
        trace_id=row.trace_id,
    )
    for delivery in row.deliveries.select_related("recipient").order_by("pk"):
        # The answer as first given: each delivery as it was created, not as it is now.
        rejected = delivery.decision == Decision.REJECT
        state = DeliveryState.REJECTED if rejected else DeliveryState.PENDING
        result.deliveries.append(_entry(delivery, state=state))
    delivered = {entry["agent"] for entry in result.deliveries}
    result.unknown = [slug for slug in row.recipients if slug not in delivered]
    return result


def _entry(delivery: Delivery, *, state: str | None = None) -> dict[str, Any]:
    return {
        "agent": delivery.recipient.slug,
        "decision": delivery.decision,
        "reason": delivery.decision_reason,
        "state": state or delivery.state,
    }


def _answer_id(row: Message) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"a2a-hub:fan-out:{row.pk}"))


@transaction.atomic
def fanout_accept(
    *,
    caller: Agent,
    message: dict[str, Any],
    request_metadata: dict[str, Any] | None = None,
    traceparent: str = "",
) -> FanOutResult:
    """Record a broadcast or knowledge share and queue a delivery per recipient the policy
    lets through. Raises `NotFanOut` for any other kind, `ValidationFailed` for a bad envelope
    or scope (nothing is written then)."""
    kind, envelope, summary = classify(message, default_kind="request")
    if kind not in FAN_OUT_KINDS or envelope is None:
        raise NotFanOut(
            "address an agent: send messages to /a2a/<agent>/; the hub's own endpoint takes "
            "broadcast and knowledge_share envelopes, which it fans out"
        )
    message_id = str(message["messageId"])
    digest = message_digest(message, target_pk=None)
    previous = _previous(caller, message_id, digest)
    if previous is not None:
        return previous
    recipients, unknown = _recipients(kind, envelope, caller, message)
    limit = settings.HUB_FANOUT_MAX_RECIPIENTS
    if len(recipients) > limit:
        raise ValidationFailed(
            "too many recipients",
            [
                FieldProblem(
                    _payload_field(message, "scope" if kind == "broadcast" else "relevantTo"),
                    f"{len(recipients)} agents; at most {limit} per message — narrow it down",
                )
            ],
        )
    hub = hub_metadata(message.get("metadata"), request_metadata or {})
    priority = str(envelope.get("priority", "normal"))
    judged = decide_batch(
        [
            Facts(
                caller.slug,
                agent.slug,
                kind,
                "",
                priority,
                (caller.slug,),
                new_task=False,
                content=message_content(
                    message, caller=caller.slug, target=agent.slug, kind=kind, skill=""
                ),
            )
            for agent in recipients
        ],
        [caller.pk] * len(recipients),
    )
    passed = [j for j in judged if j.decision.delivers]
    correlation_id = str(envelope.get("correlationId") or hub.get("correlationId") or "")[:128]
    message, content = fan_out_masked(message, [j.decision for j in judged])
    stored_envelope: dict[str, Any] | None = envelope
    if content:
        stored_envelope, summary = masked_summary(message, kind)
    context_id = str(message.get("contextId") or new_id())
    row = message_row(
        message,
        role="user",
        direction=Direction.REQUEST,
        task=None,
        kind=kind,
        envelope=stored_envelope,
        summary=summary,
        digest=digest,
        request_metadata=request_metadata or {},
        sender=caller,
        recipients=[a.slug for a in recipients] + unknown,
        context_id=context_id,
        correlation_id=correlation_id,
        trace_id=trace_id_of(traceparent) or new_id().replace("-", ""),
        decision=Decision.DELIVER if passed else Decision.REJECT,
        decision_reason="fan_out" if passed else judged[0].decision.reason if judged else "",
        decision_detail=f"{len(passed)} of {len(recipients)} recipients",
        decision_policy_version=judged[0].policy_version if judged else None,
        delivery_state=DeliveryState.PENDING if passed else DeliveryState.REJECTED,
        **content,
    )
    row.save(force_insert=True)
    ledger_decisions([row])
    now = timezone.now()
    deliveries = []
    for agent, verdict in zip(recipients, judged, strict=True):
        delivers = verdict.decision.delivers
        deliveries.append(
            Delivery(
                message=row,
                recipient=agent,
                decision=verdict.decision.action,
                decision_reason=verdict.decision.reason,
                state=DeliveryState.PENDING if delivers else DeliveryState.REJECTED,
                next_attempt_at=now
                if delivers and agent.delivery_mode == DeliveryMode.ENDPOINT
                else None,
                last_error="" if delivers else verdict.decision.detail,
            )
        )
    inbox_enqueue(
        deliveries,
        wake={
            d.recipient_id
            for d in deliveries
            if d.state == DeliveryState.PENDING and d.next_attempt_at is None
        },
    )
    if any(d.next_attempt_at is not None for d in deliveries):
        publish_many_on_commit([("outbox", FanOutQueued(message_pk=row.pk))])
    publish_traffic_on_commit([message_item(row, None)], {})
    result = FanOutResult(
        message_id,
        context_id,
        unknown=unknown,
        answer_id=_answer_id(row),
        message_pk=row.pk,
        trace_id=row.trace_id,
    )
    if not passed and judged:
        result.refusal = judged[0].decision
    for delivery in deliveries:
        result.deliveries.append(_entry(delivery))
    return result
