"""Running the hub's (synchronous, transactional) services from async code.

The hub's database work from the event loop runs on one dedicated thread, so it uses one
connection and never blocks the loop. A plain executor is enough here: the services need none
of asgiref's thread-sensitive bookkeeping, and skipping it is measurably cheaper on the A2A
hot path.

One exception: the group commits of the hot path (`write`) on the embedded SQLite database run
on the event loop's own thread when no other writer holds the database at that moment. Such a
transaction is a couple of milliseconds of CPU on a local file (in WAL mode with
synchronous=NORMAL a commit does not wait for the disk): about what the loop spends on one call
anyway. Handing it to the database thread and its result back cost two trips between the
threads, each waiting for the interpreter lock, more than the transaction itself under load
(bench/throughput.py: +21% calls/s at concurrency 16). When another writer holds the lock —
another process, the checkpointer catching up — the transaction goes to the database thread,
which waits for it: the loop never waits for a lock. PostgreSQL is across a socket: always the
thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from django.db import DEFAULT_DB_ALIAS, close_old_connections, connections

from a2a_core.sqlite.base import DatabaseWrapper as SQLite

P = ParamSpec("P")
R = TypeVar("R")

_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hub-db")


def _fresh[R](fn: Callable[[], R]) -> R:
    # Outside Django's request cycle nobody recycles connections: drop broken or expired
    # ones before each call (with PostgreSQL's pool this returns the connection to the pool).
    close_old_connections()
    return fn()


async def db[**P, R](fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """Call a sync service on the hub's database thread and await its result."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_executor, _fresh, functools.partial(fn, *args, **kwargs))


def run_on_db_thread[R](fn: Callable[[], R]) -> R:
    """Run `fn` on the database thread from sync code and wait (shutdown, tests)."""
    return _executor.submit(fn).result()


async def write[R](fn: Callable[[], R]) -> R:
    """Run `fn`, one short write transaction: on this thread (the event loop's) when the
    database is the hub's SQLite file and no other writer holds it, else on the database
    thread (see the module's docstring)."""
    connection = connections[DEFAULT_DB_ALIAS]
    if isinstance(connection, SQLite) and not connection.is_in_memory_db():
        with _on_the_loop():
            connection.close_if_unusable_or_obsolete()
            connection.ensure_connection()
            if not connection.in_atomic_block and connection.take_writer_lock_now():
                try:
                    return fn()
                finally:
                    connection.release_writer_lock()
    return await db(fn)


def close_loop_connection() -> None:
    """Close the connection `write` opened on this thread (the loop's, at shutdown)."""
    with _on_the_loop():
        connections[DEFAULT_DB_ALIAS].close()


_UNSAFE = "DJANGO_ALLOW_ASYNC_UNSAFE"


@contextlib.contextmanager
def _on_the_loop() -> Iterator[None]:
    """Django refuses database calls on a thread that runs an event loop, lest they block it;
    `write` does so knowingly, for a transaction that waits on nothing."""
    before = os.environ.get(_UNSAFE)
    os.environ[_UNSAFE] = "true"
    try:
        yield
    finally:
        if before is None:
            del os.environ[_UNSAFE]
        else:
            os.environ[_UNSAFE] = before
