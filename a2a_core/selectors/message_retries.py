"""Reads about messages seen before: the earlier copies a retry repeats, what a retry is
answered with, and the request a `response` answers."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Literal, NamedTuple

from django.conf import settings

from a2a_core.models import (
    Agent,
    Decision,
    DeliveryMode,
    Direction,
    Message,
    Task,
    TaskState,
)
from a2a_core.schemas.a2a import envelope_part_indexes
from a2a_core.selectors.task_wire import message_view, task_view


class RetryKey(NamedTuple):
    """What makes a message a retry of an earlier one: the same sender, messageId and
    content for the same target (`message_digest`)."""

    sender_pk: int
    message_id: str
    digest: str


class EarlierCopy(NamedTuple):
    """The last copy of a message sent before: enough to answer a retry as the first call
    was answered, or, when its task has moved on, to record the message as new work."""

    pk: int
    created_at: datetime
    kind: str
    envelope: dict[str, Any] | None
    task_id: str
    repeat: int
    # The caller has moved the copy's task on (`_moved_on`): the message is new work.
    moved_on: bool = False


def message_earlier_copies(*, keys: set[RetryKey]) -> dict[RetryKey, EarlierCopy]:
    """The last earlier copy of each key (the highest `repeat`), by key. A refused copy and a
    copy without a task count for nothing: such a message is taken as new. A copy whose task
    the caller has moved on from is `moved_on`: the message is new work too, recorded as the
    copy's next `repeat`."""
    if not keys:
        return {}
    earlier: dict[RetryKey, EarlierCopy] = {}
    for pk, created_at, kind, envelope, task_id, repeat, sender_id, message_id, digest in (
        Message.objects.filter(
            direction=Direction.REQUEST,
            sender_id__in={k.sender_pk for k in keys},
            message_id__in={k.message_id for k in keys},
            digest__in={k.digest for k in keys},
        )
        .exclude(decision=Decision.REJECT)
        .values_list(
            "pk",
            "created_at",
            "kind",
            "envelope",
            "task_id",
            "repeat",
            "sender_id",
            "message_id",
            "digest",
        )
    ):
        found = RetryKey(sender_id, message_id, digest)
        if found in keys and task_id is not None:
            last = earlier.get(found)
            if last is None or repeat > last.repeat:
                earlier[found] = EarlierCopy(pk, created_at, kind, envelope, task_id, repeat)
    moved_on = _moved_on(earlier)
    return {
        key: copy._replace(moved_on=True) if key in moved_on else copy
        for key, copy in earlier.items()
    }


def _moved_on(copies: dict[RetryKey, EarlierCopy]) -> set[RetryKey]:
    """The copies whose task has moved on since: the same caller has sent that task another
    message after the copy (it named the task, so it had the copy's answer, which alone told
    it the task's id), or the task was canceled (its work stopped). The copy's messageId and
    content sent again after that are not a retry of a lost answer but new work, as they are
    calling an a2a-sdk agent directly (the conformance suite reuses one messageId per session
    this way). Reading the task (GetTask, SubscribeToTask) moves nothing on: a caller that
    lost an answer may look before it sends again."""
    if not copies:
        return set()
    task_ids = {copy.task_id for copy in copies.values()}
    canceled = set(
        Task.objects.filter(pk__in=task_ids, state=TaskState.CANCELED).values_list("pk", flat=True)
    )
    latest: dict[tuple[str, int], int] = {}
    for task_id, sender_id, pk in Message.objects.filter(
        direction=Direction.REQUEST,
        task_id__in=task_ids,
        sender_id__in={key.sender_pk for key in copies},
    ).values_list("task_id", "sender_id", "pk"):
        latest[(task_id, sender_id)] = max(pk, latest.get((task_id, sender_id), 0))
    return {
        key
        for key, copy in copies.items()
        if copy.task_id in canceled or latest.get((copy.task_id, key.sender_pk), 0) > copy.pk
    }


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


class RetryWait(NamedTuple):
    """What a blocking retry waits on: the task's agent, whether it is an endpoint agent
    (whose tasks the hub settles by their deadline), and that deadline."""

    agent: str
    endpoint: bool
    deadline: datetime | None


def message_retry_wait(*, task_id: str) -> RetryWait:
    task = Task.objects.select_related("target").get(pk=task_id)
    deadline = task.deadline
    endpoint = task.target.delivery_mode == DeliveryMode.ENDPOINT
    if endpoint and deadline is None:
        deadline = task.created_at + timedelta(seconds=settings.HUB_FORWARD_TIMEOUT)
    return RetryWait(task.target.slug, endpoint, deadline)
