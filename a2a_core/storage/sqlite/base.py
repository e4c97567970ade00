"""The SQLite backend, with write transactions queued on a file lock.

Every transaction the hub opens on SQLite takes the write lock at once (BEGIN IMMEDIATE). When
another connection holds it, SQLite's busy handler sleeps 1, 2, 5, 10 ... up to 100 ms between
tries, so a second writer — another thread, or another hub process (`a2a serve --workers`) —
often sleeps far longer than the few milliseconds the holder needs. Here the connections first
take an exclusive lock on `<database>-writer.lock`, retried within a millisecond, so writers
follow each other closely; SQLite's own lock and busy timeout still apply to anything else.

A server process also copies the write-ahead log back into the database on a thread of its
own (`Checkpointer`), so that no group commit has to (see there).
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
import time
from typing import Any

from django.db.backends.sqlite3 import base

from a2a_core.backoff import backoff
from a2a_core.logging import get_logger

log = get_logger("sqlite")

# How long a writer waits for the lock before it lets SQLite decide (`PRAGMA busy_timeout`).
WAIT_SECONDS = 10.0
# Every connection: the write-ahead log lets readers run while one writer commits, and with
# synchronous=NORMAL a commit does not wait for the disk (a crash of the machine, not of the
# process, can lose the last commits); foreign keys checked; temporary tables in memory.
_PRAGMAS = (
    "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
    f"PRAGMA busy_timeout={int(WAIT_SECONDS * 1000)}; PRAGMA foreign_keys=ON; "
    "PRAGMA temp_store=MEMORY;"
)
_LONGEST_NAP = 0.001
# Databases whose checkpoints a `Checkpointer` of this process makes: its connections leave
# them alone.
_checkpointed_aside: set[str] = set()


def _open_lock(database: str) -> int:
    return os.open(f"{database}-writer.lock", os.O_RDWR | os.O_CREAT, 0o600)


class DatabaseWrapper(base.DatabaseWrapper):
    _lock_fd: int | None = None
    _locked = False

    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        conn = super().get_new_connection(conn_params)
        conn.executescript(_PRAGMAS)
        # A deployment's own `init_command` (OPTIONS) has the last word.
        for command in getattr(self, "init_commands", ()):
            if command := command.strip():
                conn.execute(command)
        if self.settings_dict["NAME"] in _checkpointed_aside:
            conn.execute("PRAGMA wal_autocheckpoint=0")
        if not self.is_in_memory_db():
            self._lock_fd = _open_lock(self.settings_dict["NAME"])
        return conn

    def _start_transaction_under_autocommit(self) -> None:
        self._lock()
        try:
            super()._start_transaction_under_autocommit()  # type: ignore[misc]
        except BaseException:
            self._unlock()
            raise

    def _commit(self) -> None:
        try:
            super()._commit()  # type: ignore[misc]
        finally:
            self._unlock()

    def _rollback(self) -> None:
        try:
            super()._rollback()  # type: ignore[misc]
        finally:
            self._unlock()

    def _close(self) -> None:
        try:
            super()._close()  # type: ignore[misc]
        finally:
            if self._lock_fd is not None:
                os.close(self._lock_fd)  # releases the lock with it
                self._lock_fd, self._locked = None, False

    def take_writer_lock_now(self) -> bool:
        """Take the writers' lock for the next transaction if no other writer holds it at this
        moment (committing or rolling back releases it, as usual); never waits."""
        if self._lock_fd is None or self._locked:
            return False
        return self._try_lock()

    def release_writer_lock(self) -> None:
        """Let go of a lock taken for a transaction that never began."""
        if not self.in_atomic_block:
            self._unlock()

    def _lock(self) -> None:
        if self._lock_fd is None or self._locked:
            return
        naps, deadline = 0, time.monotonic() + WAIT_SECONDS
        while not self._try_lock():
            if time.monotonic() >= deadline:
                return  # SQLite's busy timeout has the last word
            naps += 1
            time.sleep(backoff(naps, 0.0001, _LONGEST_NAP))

    def _try_lock(self) -> bool:
        assert self._lock_fd is not None
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        self._locked = True
        return True

    def _unlock(self) -> None:
        if self._locked and self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            self._locked = False


class Checkpointer:
    """Copies the write-ahead log back into the database every `every` seconds, on a thread
    and connection of its own.

    By default SQLite checkpoints in whichever commit takes the log past 1,000 pages: that
    commit waits for the copy and its fsyncs, and under load a group commit carries dozens of
    calls, all waiting with it. While a Checkpointer runs, this process's connections to its
    database made from then on skip those checkpoints; a passive checkpoint here never blocks
    them. Other processes (the CLI, other workers) keep SQLite's default.

    A writer starts the log from its beginning again only when everything in it has been
    copied; under steady writes a passive checkpoint never quite catches up, and the log
    would grow for as long as they go on (hundreds of megabytes a minute, every read slower
    for it). So once the log holds RESTART_PAGES, the checkpointer catches up the last few
    pages holding the writers' lock: writers wait for that short copy only."""

    RESTART_PAGES = 1000

    def __init__(self, path: str, every: float = 1.0) -> None:
        self.path = path
        self.every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hub-checkpoint", daemon=True)

    def start(self) -> Checkpointer:
        _checkpointed_aside.add(self.path)
        self._thread.start()
        return self

    def stop(self) -> None:
        _checkpointed_aside.discard(self.path)
        self._stop.set()
        self._thread.join(timeout=WAIT_SECONDS)

    def _run(self) -> None:
        db = sqlite3.connect(self.path, timeout=WAIT_SECONDS)
        lock_fd = _open_lock(self.path)
        try:
            while not self._stop.wait(self.every):
                try:
                    self._checkpoint(db, lock_fd)
                except sqlite3.Error:
                    log.warning("WAL checkpoint failed", exc_info=True)
        finally:
            db.close()
            os.close(lock_fd)

    def _checkpoint(self, db: sqlite3.Connection, lock_fd: int) -> None:
        _, logged, _ = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        if logged < self.RESTART_PAGES:
            return
        # Blocking: a writer between two transactions lets go of the lock only for moments.
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        try:
            db.execute("PRAGMA wal_checkpoint(PASSIVE)")
        finally:
            fcntl.flock(lock_fd, fcntl.LOCK_UN)
