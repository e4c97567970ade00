"""Where the hub's group commits run: on writer threads with connections of their own, never on
the event loop's thread, with Django's guard against blocking the loop in force throughout; on
PostgreSQL several at once, so one that waits for a lock does not stall the others."""

from __future__ import annotations

import asyncio
import fcntl
import os
import threading
import time
from collections.abc import Iterator

import psycopg
import pytest
from a2a.types.a2a_pb2 import TaskState
from django.core.exceptions import SynchronousOnlyOperation
from django.db import connection, transaction

from a2a_core.asyncdb import db
from a2a_core.models import Agent
from a2a_core.storage.writers import writer
from tests.a2a_core.protocol.helpers import request, send, stored_task
from tests.conftest import database_url
from tests.factories import register

SQLITE = connection.vendor == "sqlite"


def registered(name: str) -> int:
    """A write transaction; which thread ran it."""
    with transaction.atomic():
        register(name)
    return threading.get_ident()


@pytest.fixture
def another_writer() -> Iterator[int]:
    """Holds the SQLite writers' lock the way another hub process's transaction does."""
    fd = os.open(f"{connection.settings_dict['NAME']}-writer.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield fd
    finally:
        os.close(fd)  # lets go of the lock if the test has not


def lock_taken_within(seconds: float) -> bool:
    """Whether another process could take the SQLite writers' lock within `seconds`. The hub's
    checkpointer holds it for moments of its own (storage.sqlite.base.Checkpointer), so a
    lock let go is taken within a few tries; one a commit kept never is."""
    fd = os.open(f"{connection.settings_dict['NAME']}-writer.lock", os.O_RDWR)
    deadline = time.monotonic() + seconds
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.01)
    finally:
        os.close(fd)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("hub_server")
async def test_a_group_commit_runs_on_a_writer_thread_and_the_loop_keeps_djangos_guard():
    database_thread = await db(threading.get_ident)

    ran_on = await writer().run(lambda: registered("alpha"))

    assert ran_on not in (threading.get_ident(), database_thread)
    assert await db(lambda: Agent.objects.filter(slug="alpha").exists())
    # Nothing in the process lifted Django's guard against blocking the loop.
    assert "DJANGO_ALLOW_ASYNC_UNSAFE" not in os.environ
    with pytest.raises(SynchronousOnlyOperation):
        Agent.objects.count()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("hub_server")
@pytest.mark.skipif(not SQLITE, reason="the writers' lock file is the embedded SQLite database's")
async def test_while_another_writer_holds_sqlite_the_commit_waits_and_the_loop_does_not(
    another_writer,
):
    ticks = 0

    async def ticking() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    ticker = asyncio.create_task(ticking())
    try:
        writing = asyncio.create_task(writer().run(lambda: registered("beta")))
        await asyncio.sleep(0.3)
        assert not writing.done(), "the commit went ahead while another writer held the lock"
        assert ticks >= 10, "the event loop was blocked"
        fcntl.flock(another_writer, fcntl.LOCK_UN)
        await asyncio.wait_for(writing, 10)
    finally:
        ticker.cancel()
    assert await db(lambda: Agent.objects.filter(slug="beta").exists())


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("hub_server")
async def test_a_commit_that_fails_writes_nothing_and_leaves_the_database_to_the_next():
    def failing() -> None:
        with transaction.atomic():
            register("gamma")
            raise ValueError("the batch went wrong")

    with pytest.raises(ValueError, match="went wrong"):
        await writer().run(failing)

    assert not await db(lambda: Agent.objects.filter(slug="gamma").exists())
    if SQLITE:  # the failed commit let go of the writers' lock: another process can take it
        assert await asyncio.to_thread(lock_taken_within, 5.0), "the failed commit kept the lock"
    # The next commit goes ahead at once, on a connection still fit for it.
    await asyncio.wait_for(writer().run(lambda: registered("delta")), 5)
    assert await db(lambda: Agent.objects.filter(slug="delta").exists())


@pytest.mark.live
@pytest.mark.skipif(SQLITE, reason="SQLite takes one writer at a time, whatever the hub does")
async def test_on_postgresql_a_call_waiting_for_a_locked_task_does_not_stall_the_others(hub, sdk):
    """Another connection holds a task's row (as a long transaction of an admin's, or another
    worker's, would): the follow-up message on that task waits for it, and meanwhile every
    other caller's calls are committed and answered."""
    await hub.endpoint_agent("sloth")
    _, alpha = await hub.caller("alpha")
    _, beta = await hub.caller("beta")
    asking = await sdk("sloth", alpha)
    others = await sdk("sloth", beta)
    question = await send(asking, request("ask which colour?"))
    assert question.status.state == TaskState.TASK_STATE_INPUT_REQUIRED

    with psycopg.connect(database_url()) as holder:
        holder.execute("SELECT id FROM a2a_core_task WHERE id = %s FOR UPDATE", (question.id,))
        follow_up = asyncio.create_task(
            send(asking, request("blue", task_id=question.id, context_id=question.context_id))
        )
        answered = await asyncio.wait_for(
            asyncio.gather(*(send(others, request(f"echo {i}")) for i in range(6))), 20
        )
        assert [task.status.state for task in answered] == [TaskState.TASK_STATE_COMPLETED] * 6
        assert not follow_up.done(), "the follow-up went ahead while its task was locked"
        holder.rollback()

    finished = await asyncio.wait_for(follow_up, 20)
    assert finished.status.state == TaskState.TASK_STATE_COMPLETED
    assert (await stored_task(question.id)).state == "completed"
