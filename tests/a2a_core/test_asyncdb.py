"""Where the hub's group commits run: on the embedded SQLite database, on the event loop's own
thread while no other writer holds the database; otherwise (another writer, PostgreSQL) on
the database thread, without the loop ever waiting."""

from __future__ import annotations

import asyncio
import fcntl
import os
import threading
from collections.abc import Iterator

import pytest
from django.core.exceptions import SynchronousOnlyOperation
from django.db import connection, transaction

from a2a_core.asyncdb import db, write
from a2a_core.models import Agent
from tests.factories import register

# The session's hub server releases the database thread's connections when the session ends.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("hub_server")]

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


async def test_a_group_commit_runs_on_the_loops_thread_on_sqlite_and_on_the_database_thread_on_postgresql():
    database_thread = await db(threading.get_ident)

    ran_on = await write(lambda: registered("alpha"))

    assert ran_on == (threading.get_ident() if SQLITE else database_thread)
    assert await db(lambda: Agent.objects.filter(slug="alpha").exists())
    # Django's guard against blocking the loop is back in force.
    assert "DJANGO_ALLOW_ASYNC_UNSAFE" not in os.environ
    with pytest.raises(SynchronousOnlyOperation):
        Agent.objects.count()


@pytest.mark.skipif(not SQLITE, reason="the writers' lock file is the embedded SQLite database's")
async def test_while_another_writer_holds_sqlite_the_commit_waits_on_the_database_thread_not_the_loop(
    another_writer,
):
    database_thread = await db(threading.get_ident)
    ticks = 0

    async def ticking() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    ticker = asyncio.create_task(ticking())
    try:
        writing = asyncio.create_task(write(lambda: registered("beta")))
        await asyncio.sleep(0.3)
        assert not writing.done(), "the commit went ahead while another writer held the lock"
        assert ticks >= 10, "the event loop was blocked"
        fcntl.flock(another_writer, fcntl.LOCK_UN)
        assert await asyncio.wait_for(writing, 10) == database_thread
    finally:
        ticker.cancel()
    assert await db(lambda: Agent.objects.filter(slug="beta").exists())


async def test_a_commit_that_fails_writes_nothing_and_leaves_the_database_to_the_next():
    def failing() -> None:
        with transaction.atomic():
            register("gamma")
            raise ValueError("the batch went wrong")

    with pytest.raises(ValueError, match="went wrong"):
        await write(failing)

    assert not await db(lambda: Agent.objects.filter(slug="gamma").exists())
    if SQLITE:  # the writers' lock is free: another process could take it at once
        fd = os.open(f"{connection.settings_dict['NAME']}-writer.lock", os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    # The next commit goes ahead at once.
    assert await asyncio.wait_for(write(lambda: registered("delta")), 5)
    assert await db(lambda: Agent.objects.filter(slug="delta").exists())
