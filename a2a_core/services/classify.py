"""What a message is: its kind, its validated envelope and a one-line summary."""

from __future__ import annotations

from typing import Any

from a2a_core.errors import FieldProblem, ValidationFailed
from a2a_core.logging import get_logger
from a2a_core.models import Message, Task
from a2a_core.schemas.a2a import envelope_part_indexes, parts_summary, without_hub_metadata
from a2a_core.schemas.envelopes import (
    ENVELOPE_EXTENSION,
    envelope_json,
    envelope_summary,
    parse_envelope,
)
from a2a_core.schemas.events import MessageItem, MessageRow
from a2a_core.storage.rows import new_row

log = get_logger("classify")


def classify(
    message: dict[str, Any], *, default_kind: str, strict: bool = True
) -> tuple[str, dict[str, Any] | None, str]:
    """Return (kind, envelope, summary) for an A2A message in ProtoJSON.

    A message without an envelope is a plain `default_kind`. With `strict`, an invalid or
    ambiguous envelope raises `ValidationFailed` whose paths point into the message
    (`message.parts[0].data.payload.reason`); otherwise it is recorded as plain.
    """
    parts = message.get("parts") or []
    indexes = envelope_part_indexes(message)
    try:
        if not indexes:
            if ENVELOPE_EXTENSION in (message.get("extensions") or []):
                raise ValidationFailed(
                    "invalid envelope",
                    [
                        FieldProblem(
                            "message.parts",
                            "the message lists the envelope extension but has no data part",
                        )
                    ],
                )
            return default_kind, None, parts_summary(parts)
        if len(indexes) > 1:
            raise ValidationFailed(
                "invalid envelope",
                [FieldProblem("message.parts", f"one envelope per message, found {len(indexes)}")],
            )
        index = indexes[0]
        try:
            envelope = parse_envelope(parts[index]["data"])
        except ValidationFailed as exc:
            prefix = f"message.parts[{index}].data"
            raise ValidationFailed(
                exc.message,
                [FieldProblem(f"{prefix}.{p.field}".rstrip("."), p.message) for p in exc.problems],
            ) from None
    except ValidationFailed:
        if strict:
            raise
        log.warning(
            "agent sent an invalid envelope; recorded as plain", extra={"kind": default_kind}
        )
        return default_kind, None, parts_summary(parts)
    return envelope.kind, envelope_json(envelope), envelope_summary(envelope)


def message_row(
    message: dict[str, Any],
    *,
    role: str,
    direction: str,
    task: Task | None,
    kind: str,
    envelope: dict[str, Any] | None,
    summary: str,
    **fields: Any,
) -> Message:
    """An (unsaved) Message row for an A2A message (ProtoJSON): the one way the hub builds
    one. On `task`, it takes the task's context, hop and trace; a message on no task (a
    fan-out) gives `context_id` and `trace_id` in `fields`.

    The hub's own metadata fields are not stored with the message: they are the task's.
    """
    on_task = (
        {}
        if task is None
        else {
            "task": task,
            "context_id": task.context_id,
            "hop": task.depth + 1,
            "trace_id": task.trace_id,
        }
    )
    return new_row(
        Message,
        message_id=str(message["messageId"]),
        role=role,
        parts=message.get("parts") or [],
        metadata=without_hub_metadata(message.get("metadata")),
        extensions=message.get("extensions") or [],
        reference_task_ids=message.get("referenceTaskIds") or [],
        direction=direction,
        kind=kind,
        envelope=envelope,
        summary=summary,
        **on_task,
        **fields,
    )


def message_item(message: Message, task: Task | None, *, decided: bool = False) -> MessageItem:
    """A message as the `traffic` event lists it (plain fields only), with what its row in the
    live feed shows under `row` — so that the feed's relays draw it without reading it back.
    Agents are named by id (the relays know their slugs); `row` is left out when the message's
    human author is not at hand (the relay then reads the message). `decided`: a held message
    a human just decided on, whose drawn row shows the decision in place."""
    row = None
    author = Message._meta.get_field("author")
    if message.created_at is not None and (message.author_id is None or author.is_cached(message)):
        row = MessageRow(
            created_at=message.created_at.isoformat(),
            redirected_to_id=message.redirected_to_id,
            author=message.author.get_username() if message.author is not None else None,
            recipients=len(message.recipients or ()),
            summary=message.summary,
            detail=message.decision_detail,
            latency_ms=message.latency_ms,
            decision_latency_us=message.decision_latency_us,
            trace_id=message.trace_id,
            hop=message.hop,
            policy_version=message.decision_policy_version,
        )
    return MessageItem(
        message_pk=message.pk,
        kind=message.kind,
        direction=message.direction,
        sender_id=message.sender_id,
        target_id=message.target_id,
        decision=message.decision,
        reason=message.decision_reason,
        task_id=task.pk if task else message.task_id,
        state=task.state if task else "",
        row=row,
        decided=decided,
    )
