"""A group commit's callers have their results before its events go out; every committed
event still goes out, in order, also when a member breaks the batch and the others are
written one by one."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import pytest
from django.db import transaction

from a2a_core import events
from a2a_core.schemas.events import TaskChanged
from a2a_core.storage.batching import Batcher
from tests.a2a_core.protocol.helpers import eventually


@pytest.fixture
async def sent() -> AsyncIterator[list[str]]:
    """The groups this process's publisher sends to, in order, with the publisher on this
    test's loop (the in-process hub's, if it runs, is put back afterwards)."""
    groups: list[str] = []

    def listener(group: str, payload: dict) -> None:
        groups.append(group)

    before = events._loop, events._queue, events._publisher
    await events.bind_to_running_loop()
    events.add_local_listener(listener)
    try:
        yield groups
    finally:
        events.remove_local_listener(listener)
        ours = events._publisher
        events._loop, events._queue, events._publisher = before
        if ours is not None:
            ours.cancel()


def announce(names: Sequence[str]) -> list[str]:
    """A batch function: one transaction announcing `task.<name>` for each name after commit;
    a name "broken" breaks the transaction."""
    with transaction.atomic():
        for name in names:
            if name == "broken":
                raise ValueError("this member breaks the batch")
            events.publish_on_commit(f"task.{name}", TaskChanged(task_id=name, seq=1))
    return list(names)


async def settled(sent: list[str], count: int) -> list[str]:
    async def all_sent() -> list[str] | None:
        return sent if len(sent) >= count else None

    found: list[str] = await eventually(all_sent, within=5)
    return found


@pytest.mark.django_db(transaction=True)
async def test_the_callers_go_on_before_their_commits_events_are_sent(sent):
    batcher: Batcher[str, str] = Batcher(announce)

    async def call(name: str) -> list[str]:
        await batcher.submit(name)
        return list(sent)  # what had gone out when this caller went on

    seen_by_callers = await asyncio.gather(*(call(name) for name in ("a", "b", "c")))

    assert seen_by_callers == [[], [], []]
    assert await settled(sent, 3) == ["task.a", "task.b", "task.c"]


@pytest.mark.django_db(transaction=True)
async def test_a_broken_member_costs_the_others_none_of_their_events(sent):
    batcher: Batcher[str, str] = Batcher(announce)

    results = await asyncio.gather(
        *(batcher.submit(name) for name in ("a", "broken", "c")), return_exceptions=True
    )

    assert results[0] == "a" and results[2] == "c"
    assert isinstance(results[1], ValueError)
    assert await settled(sent, 2) == ["task.a", "task.c"]
    await asyncio.sleep(0.1)
    assert sent == ["task.a", "task.c"]
