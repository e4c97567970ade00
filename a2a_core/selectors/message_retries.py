"""Reads about messages seen before: the earlier copies a retry repeats, what a retry is
answered with, and the request a `response` answers."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, NamedTuple

from a2a_core.models import Agent, Decision, Direction, Message, Task
from a2a_core.schemas.a2a import envelope_part_indexes
from a2a_core.selectors.task_wire import message_view, task_view


class RetryKey(NamedTuple):
    """What makes a message a retry of an earlier one: the same sender, messageId and
    content for the same target (`message_digest`)."""

    sender_pk: int
    message_id: str
    digest: str


class EarlierCopy(NamedTuple):
    """The first copy of a message a retry repeats: enough to answer the retry as the first
    call was answered."""

    pk: int
    created_at: datetime
    kind: str
    envelope: dict[str, Any] | None
    task_id: str


def message_earlier_copies(*, keys: set[RetryKey]) -> dict[RetryKey, EarlierCopy]:
    """The earlier copies these keys repeat (refused copies and copies without a task are
    not repeated: such a message is taken as new), by key."""
    if not keys:
        return {}
    earlier = {}
    for pk, created_at, kind, envelope, task_id, sender_id, message_id, digest in (
        Message.objects.filter(
            direction=Direction.REQUEST,
            sender_id__in={k.sender_pk for k in keys},
            message_id__in={k.message_id for k in keys},
            digest__in={k.digest for k in keys},
        )
        .exclude(decision=Decision.REJECT)
        .values_list(
            "pk", "created_at", "kind", "envelope", "task_id", "sender_id", "message_id", "digest"
        )
    ):
        found = RetryKey(sender_id, message_id, digest)
        if found in keys and task_id is not None:
            earlier[found] = EarlierCopy(pk, created_at, kind, envelope, task_id)
    return earlier


def request_answered_by(*, caller: Agent, target: Agent, message: dict[str, Any]) -> str | None:
    """The task of the request a `response` message answers (seed 004 `sendA2AResponse`): a
    request from `target` to `caller` with the response's correlationId. None when the message
    is not a response, or answers nothing the hub saw."""
    indexes = envelope_part_indexes(message)
    if not indexes:
        return None
    data = message["parts"][indexes[0]].get("data")
    if not isinstance(data, dict) or data.get("kind") != "response":
        return None
    correlation_id = str(data.get("correlationId") or "")
    if not correlation_id:
        return None
    found: str | None = (
        Message.objects.filter(
            direction=Direction.REQUEST,
            sender=target,
            target=caller,
            correlation_id=correlation_id[:128],
            task__isnull=False,
        )
        .order_by("-pk")
        .values_list("task_id", flat=True)
        .first()
    )
    return found


def message_duplicate_view(*, task_id: str, history_length: int | None) -> dict[str, Any]:
    task = Task.objects.get(pk=task_id)
    return task_view(task, history_length=history_length)


class RetryAnswer(NamedTuple):
    kind: Literal["message", "task"]
    view: dict[str, Any]


def message_retry_answer(
    *, task_id: str, request_pk: int, history_length: int | None
) -> RetryAnswer:
    """What a retry of a request gets back: ("message", the Message the endpoint agent
    answered it with, exactly as the first call returned it), or ("task", the task as it is
    now, `message_duplicate_view`)."""
    task = Task.objects.get(pk=task_id)
    direct = Message.objects.filter(
        task=task, direction=Direction.REPLY, in_reply_to_id=request_pk
    ).first()
    if direct is None:
        return RetryAnswer("task", task_view(task, history_length=history_length))
    view = message_view(direct, task)
    del view["taskId"]
    return RetryAnswer("message", view)
