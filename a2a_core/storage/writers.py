"""Where the group commits run: writer threads, each with a database connection it keeps.

A group commit (`a2a_core.storage.batching`) hands its batch function — one short write
transaction — to the deployment's writer, which runs it on a thread of its own, never on the
event loop's: Django's guard against blocking the loop stays in force everywhere, and no
switch in the process lifts it.

- SQLite (`SQLiteWriter`): one writer thread. The database takes one writer at a time
  whatever the process does; one thread keeps the batches large. The sqlite3 module lets go
  of the interpreter lock while SQLite itself works (its B-trees, indexes and log), so that
  work overlaps with the loop's.
- PostgreSQL (`PostgresWriter`): HUB_DB_WRITERS threads (default 2), each with a connection
  of its own. The group commits take one at a time, and a second only while the batch on
  the first is overdue (waiting for a row lock: `storage.batching.SPILL_AFTER`), so one lock
  does not stall the process's other calls.

A writer thread keeps its connection from one batch to the next (replaced when an error left
it unusable or, seen from its socket before each batch, PostgreSQL has closed it), where the
database thread hands its pooled connection back after every call. The figures behind each
choice (the thread against the loop's own thread on SQLite, how many writers on PostgreSQL)
are in bench/README.md, "The write path's room".

Why threads and not psycopg's async connections on the loop: what the loop would save is the
hand-over of each batch to a thread and back. A build that ran PostgreSQL's group commits on
the loop's own thread, blocking it, saved all of that and gained nothing, in the same rounds
as this code (`bench/throughput.py --backend postgres --against`, three runs at concurrency
16: 99.0 / 108.8 / 90.2 against 102.8 / 105.5 / 106.7 calls/s). Either way the process was
busy 0.69-0.72 of a core: during a batch's waits for PostgreSQL (7.5-8.8 ms of its 16.6-19.1)
the other calls wait for that batch or for the agent, so an async connection would sit
through the same waits, not shorten them (bench/README.md, "The writes on the loop's own
thread").
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections

from a2a_core.storage.drivers import close_if_hung_up

type _Job = tuple[Callable[[], Any], Future[Any]] | None


class _WriterThread:
    """One thread, one connection: runs the jobs given to it, one at a time."""

    def __init__(self, name: str) -> None:
        self.jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self.thread.start()

    def submit[R](self, fn: Callable[[], R]) -> Future[R]:
        future: Future[R] = Future()
        self.jobs.put((fn, future))
        return future

    def _serve(self) -> None:
        _not_first_on_waking()
        while (job := self.jobs.get()) is not None:
            fn, future = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                _healthy()
                result = fn()
            except BaseException as exc:
                future.set_exception(exc)
            else:
                future.set_result(result)
        connections.close_all()


def _not_first_on_waking() -> None:
    """Keep this thread, when a batch wakes it, from taking the core of the event loop's
    thread that handed the batch over (Linux: `SCHED_BATCH`, which only gives up priority).

    Otherwise the kernel may run the woken writer at once on the loop's core, where it can do
    nothing before the loop's thread lets go of the interpreter lock: `py-spy` found the loop's
    thread in the hand-over (`SimpleQueue.put`) in 3.6% of its samples at concurrency 16.
    `bench/throughput.py --backend sqlite --concurrency 1 16 --rounds 2 --seconds 4`, four
    pairs alternating: 0.53 / 0.56 / 0.52 / 0.55x direct at 16 against 0.52 / 0.50 / 0.51 /
    0.50x (561-606 against 515-576 calls/s, the hub's CPU 1.51-1.62 against 1.56-1.77 ms a
    call), concurrency 1 unchanged (+3.84-3.95 against +3.79-4.17 ms); PostgreSQL + Redis
    at 16, two pairs, 0.33 / 0.32x against 0.31 / 0.30x."""
    with contextlib.suppress(AttributeError, OSError):  # not Linux, or not allowed
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))


def _healthy() -> None:
    """This thread's connection, kept between batches, dropped when an error left it unusable
    or PostgreSQL has closed it since the last batch (`drivers.hung_up`: a restart of the
    server drops every connection); the next statement opens a new one."""
    connection = connections[DEFAULT_DB_ALIAS]
    if connection.connection is None:
        return
    if connection.errors_occurred:
        if connection.is_usable():
            connection.errors_occurred = False
        else:
            connection.close()
    else:
        close_if_hung_up(connection)


class Writer:
    """Runs batch functions on `capacity` writer threads; at most `capacity` at once."""

    name = "hub-write"

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._lock = threading.Lock()
        self._threads: list[_WriterThread] = []
        self._idle: list[_WriterThread] = []
        self._free: dict[asyncio.AbstractEventLoop, asyncio.Semaphore] = {}

    def _take(self) -> _WriterThread:
        with self._lock:
            if self._idle:
                return self._idle.pop()
            thread = _WriterThread(f"{self.name}-{len(self._threads) + 1}")
            self._threads.append(thread)
            return thread

    def _give_back(self, thread: _WriterThread) -> None:
        with self._lock:
            self._idle.append(thread)

    async def run[R](self, fn: Callable[[], R]) -> R:
        """Run `fn` (one transaction, made by `fn`) on a free writer thread; its result."""
        loop = asyncio.get_running_loop()
        free = self._free.get(loop)
        if free is None:
            for old in [lp for lp in self._free if lp.is_closed()]:
                del self._free[old]
            free = self._free[loop] = asyncio.Semaphore(self.capacity)
        async with free:
            thread = self._take()
            try:
                return await asyncio.wrap_future(thread.submit(fn))
            finally:
                self._give_back(thread)

    def close_connections(self) -> None:
        """Close every writer thread's connection (each on its own thread) and wait; the next
        batch opens a new one. For shutdown, and before a test database is dropped."""
        with self._lock:
            threads = list(self._threads)
        waiting = [thread.submit(connections.close_all) for thread in threads]
        for future in waiting:
            with contextlib.suppress(Exception):
                future.result(timeout=30)


class SQLiteWriter(Writer):
    name = "hub-write-sqlite"


class PostgresWriter(Writer):
    name = "hub-write-pg"


@lru_cache(maxsize=1)
def writer() -> Writer:
    """This process's writer, by the database it writes to."""
    if connections[DEFAULT_DB_ALIAS].vendor == "postgresql":
        return PostgresWriter(max(1, int(settings.HUB_DB_WRITERS)))
    return SQLiteWriter(1)
