"""Replay sets: made from recorded tasks, run through the hub as a caller of their own, each
answer recorded beside the one first given.

A set copies each task's input (its first request's parts, metadata and extensions) and its
recorded answer when it is made: the original tasks are only read, never changed. The
replays are sent (`a2a_core.delivery.replay`) as a caller of the hub's own — an agent with
the role `replay`, `replay` unless the operator names another — so they have their own rate
windows and their own place in the policy, and every process of the hub can call as it: its
token is derived from SECRET_KEY (`replay_caller_token`), never stored or shown.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from a2a_core import agent_cache
from a2a_core.errors import FieldProblem, NotFound, ValidationFailed
from a2a_core.models import Agent, Direction, Message, ReplayItem, ReplaySet, ReplayStatus, Task
from a2a_core.schemas.a2a import without_hub_metadata
from a2a_core.selectors.replay import recorded_answer
from a2a_core.services.agents import agent_register
from a2a_core.tokens import TOKEN_PREFIX, token_hash, token_prefix

REPLAY_ROLE = "replay"
DEFAULT_CALLER = "replay"
# The most tasks one set replays.
MAX_ITEMS = 1000


def _card(slug: str) -> dict[str, Any]:
    return {
        "name": slug,
        "description": "The hub's own caller for replays of recorded tasks.",
        "version": "1.0.0",
        "capabilities": {},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [
            {
                "id": "replay",
                "name": "Replay",
                "description": "Sends recorded inputs again.",
                "tags": ["replay"],
            }
        ],
    }


def replay_caller_token(agent: Agent) -> str:
    """The bearer token of a hub-owned replay caller: derived from SECRET_KEY and the agent,
    so every process of the hub knows it and none stores it."""
    key = hmac.new(
        settings.SECRET_KEY.encode(), f"a2a-hub replay caller {agent.pk}".encode(), hashlib.sha256
    ).digest()
    return TOKEN_PREFIX + base64.urlsafe_b64encode(key).decode().rstrip("=")


@transaction.atomic
def replay_caller(*, slug: str = DEFAULT_CALLER) -> Agent:
    """The hub-owned agent replays are sent as, registered on first use (an inbox agent: it
    only calls). An agent of that name that is not the hub's (another role) is refused with
    `ValidationFailed`: its token is its own."""
    agent = Agent.objects.select_for_update().filter(slug=slug).first()
    if agent is None:
        agent = agent_register(
            card=_card(slug), slug=slug, role=REPLAY_ROLE, delivery_mode="inbox"
        ).agent
    elif agent.role != REPLAY_ROLE:
        raise ValidationFailed(
            f"{slug} is not one of the hub's replay callers",
            [FieldProblem("caller", f"{slug} has its own token: replay as it with that token")],
        )
    token = replay_caller_token(agent)
    if agent.token_hash != token_hash(token):
        agent.token_hash = token_hash(token)
        agent.token_prefix = token_prefix(token)
        agent.token_issued_at = timezone.now()
        agent.save(update_fields=["token_hash", "token_prefix", "token_issued_at", "updated_at"])
        pk = agent.pk
        transaction.on_commit(lambda: agent_cache.forget(agent_id=pk, slug=slug))
    return agent


def _input(task: Task) -> dict[str, Any] | None:
    first = (
        Message.objects.filter(task=task, direction=Direction.REQUEST)
        .order_by("created_at", "pk")
        .first()
    )
    if first is None:
        return None
    return {
        "parts": first.parts,
        "metadata": without_hub_metadata(first.metadata),
        "requestMetadata": without_hub_metadata(first.request_metadata),
        "extensions": first.extensions,
    }


@transaction.atomic
def replay_set_create(
    *,
    task_ids: Sequence[str],
    caller: Agent,
    target: Agent | None = None,
    name: str = "",
    source: str = "",
    actor: User | None = None,
) -> ReplaySet:
    """A set replaying `task_ids` (in that order) as `caller`, to `target` (None: each to the
    agent that answered it). Tasks without a recorded request are left out; none at all is a
    `ValidationFailed`."""
    ids = list(dict.fromkeys(task_ids))[:MAX_ITEMS]
    tasks = Task.objects.select_related("target").in_bulk(ids)
    replay_set = ReplaySet.objects.create(
        name=name[:200],
        caller=caller,
        target=target,
        source=source[:1000],
        created_by=actor if actor is not None and actor.is_authenticated else None,
    )
    items: list[ReplayItem] = []
    for task_id in ids:
        task = tasks.get(task_id)
        wire = _input(task) if task is not None else None
        if task is None or wire is None:
            continue
        items.append(
            ReplayItem(
                replay_set=replay_set,
                position=len(items) + 1,
                original=task,
                original_target=task.target.slug,
                input=wire,
                expected=recorded_answer(task),
            )
        )
    if not items:
        raise ValidationFailed(
            "nothing to replay",
            [FieldProblem("tasks", "none of these tasks has a recorded request")],
        )
    ReplayItem.objects.bulk_create(items)
    return replay_set


def replay_run_begin(*, set_id: int) -> ReplaySet:
    """Start a run of the set: its items' last answers are cleared. Raises `NotFound`, or
    `ValidationFailed` while a run is under way."""
    with transaction.atomic():
        replay_set = ReplaySet.objects.select_for_update().filter(pk=set_id).first()
        if replay_set is None:
            raise NotFound(f"no replay set {set_id}")
        if replay_set.status == ReplayStatus.RUNNING:
            raise ValidationFailed(
                "this set is running", [FieldProblem("set", "wait for the run under way to end")]
            )
        replay_set.status = ReplayStatus.RUNNING
        replay_set.runs += 1
        replay_set.done = 0
        replay_set.run_at = timezone.now()
        replay_set.save(update_fields=["status", "runs", "done", "run_at"])
        ReplayItem.objects.filter(replay_set=replay_set).update(
            actual=None, outcome="", reason="", replay_task=None
        )
    return replay_set


def replay_item_record(
    *, item_id: int, outcome: str, reason: str = "", replay_task_id: str | None = None
) -> ReplayItem:
    """What one replay got: `done` (the agent answered: its answer is read from the task the
    hub recorded), `refused` by the hub's policy, or `failed` (with `reason`)."""
    with transaction.atomic():
        item = ReplayItem.objects.select_for_update().get(pk=item_id)
        task = Task.objects.filter(pk=replay_task_id).first() if replay_task_id else None
        item.outcome = outcome
        item.reason = reason[:2000]
        item.replay_task = task
        item.actual = recorded_answer(task) if task is not None else None
        item.save(update_fields=["outcome", "reason", "replay_task", "actual"])
        ReplaySet.objects.filter(pk=item.replay_set_id).update(done=_done_count(item))
    return item


def _done_count(item: ReplayItem) -> int:
    return ReplayItem.objects.filter(replay_set_id=item.replay_set_id).exclude(outcome="").count()


def replay_run_end(*, set_id: int) -> None:
    ReplaySet.objects.filter(pk=set_id).update(status=ReplayStatus.DONE)
