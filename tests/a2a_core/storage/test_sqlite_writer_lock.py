"""The hub's SQLite backend: writers queue on the database's writer lock file, and one that has
waited too long gets SQLite's own error instead of hanging; a server's checkpoints run aside."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import OperationalError
from django.db.utils import ConnectionHandler

from a2a_core.storage.sqlite import base as writer_lock
from a2a_core.storage.sqlite.base import Checkpointer


def sqlite_database(path, busy_ms: int = 10_000) -> ConnectionHandler:
    return ConnectionHandler(
        {
            "default": {
                "ENGINE": "a2a_core.storage.sqlite",
                "NAME": str(path),
                "OPTIONS": {
                    "init_command": f"PRAGMA journal_mode=WAL; PRAGMA busy_timeout={busy_ms};",
                    "transaction_mode": "IMMEDIATE",
                },
            }
        }
    )


@contextmanager
def writing(connections: ConnectionHandler) -> Iterator[Any]:
    """A write transaction on this handler's connection (as `atomic()` opens one)."""
    connection = connections["default"]
    connection.set_autocommit(False, force_begin_transaction_with_broken_autocommit=True)
    try:
        with connection.cursor() as cursor:
            yield cursor
        connection.commit()
    except BaseException:
        connection.rollback()
        raise
    finally:
        connection.set_autocommit(True)


def insert(connections: ConnectionHandler, value: str) -> None:
    with writing(connections) as cursor:
        cursor.execute("INSERT INTO notes (text) VALUES (%s)", [value])


@pytest.fixture
def database(tmp_path, django_db_blocker):
    # A database of its own, whichever backend the suite runs on.
    django_db_blocker.unblock()
    connections = sqlite_database(tmp_path / "hub.sqlite3")
    with connections["default"].cursor() as cursor:
        cursor.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL)")
    yield tmp_path / "hub.sqlite3", connections
    connections.close_all()
    django_db_blocker.restore()


def in_thread(target, *args) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            target(*args)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, errors


def test_a_second_writer_waits_for_the_first_to_commit_and_both_rows_are_kept(database):
    path, first = database
    second = sqlite_database(path)
    try:
        with writing(first) as cursor:
            cursor.execute("INSERT INTO notes (text) VALUES ('first')")
            assert (path.parent / "hub.sqlite3-writer.lock").exists()
            thread, errors = in_thread(insert, second, "second")
            thread.join(0.3)
            assert thread.is_alive(), "the second writer went ahead while the first held the lock"
        thread.join(10)
        assert not thread.is_alive() and errors == []
        with first["default"].cursor() as cursor:
            cursor.execute("SELECT text FROM notes ORDER BY id")
            assert [row[0] for row in cursor.fetchall()] == ["first", "second"]
    finally:
        second.close_all()


def test_a_writer_kept_waiting_past_the_timeout_gets_sqlites_error_and_writes_nothing(
    database, monkeypatch
):
    path, first = database
    monkeypatch.setattr(writer_lock, "WAIT_SECONDS", 0.2)
    second = sqlite_database(path, busy_ms=200)
    try:
        with writing(first) as cursor:
            cursor.execute("INSERT INTO notes (text) VALUES ('first')")
            thread, errors = in_thread(insert, second, "second")
            thread.join(10)
            assert not thread.is_alive(), "the second writer hung"
        assert len(errors) == 1 and isinstance(errors[0], OperationalError)
        assert "database is locked" in str(errors[0])
        # The lock is free again: the same connection writes at once.
        insert(second, "third")
        with first["default"].cursor() as cursor:
            cursor.execute("SELECT text FROM notes ORDER BY id")
            assert [row[0] for row in cursor.fetchall()] == ["first", "third"]
    finally:
        second.close_all()


def autocheckpoint(connections: ConnectionHandler) -> int:
    with connections["default"].cursor() as cursor:
        cursor.execute("PRAGMA wal_autocheckpoint")
        return int(cursor.fetchone()[0])


def test_while_a_checkpointer_runs_its_databases_connections_leave_checkpoints_to_it(
    database, tmp_path
):
    path, _ = database
    other = sqlite_database(tmp_path / "other.sqlite3")
    checkpointer = Checkpointer(str(path), every=0.1).start()
    try:
        aside = sqlite_database(path)
        assert autocheckpoint(aside) == 0
        # Another database's connections keep SQLite's default.
        assert autocheckpoint(other) == 1000
        aside.close_all()
    finally:
        checkpointer.stop()
        other.close_all()
    after = sqlite_database(path)
    assert autocheckpoint(after) == 1000
    after.close_all()


def test_the_checkpointer_copies_the_log_back_into_the_database(database):
    path, _ = database
    checkpointer = Checkpointer(str(path), every=0.1).start()
    writer = sqlite_database(path)
    try:
        with writing(writer) as cursor:
            cursor.executemany(
                "INSERT INTO notes (text) VALUES (%s)", [["x" * 4000] for _ in range(500)]
            )
        # The writer's connection stays open and never checkpoints: only the checkpointer
        # moves the two megabytes from the log into the database file.
        deadline = time.monotonic() + 10
        while os.path.getsize(path) < 2_000_000 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert os.path.getsize(path) >= 2_000_000
        with writer["default"].cursor() as cursor:
            cursor.execute("SELECT count(*) FROM notes")
            assert cursor.fetchone()[0] == 500
    finally:
        checkpointer.stop()
        writer.close_all()


def test_under_steady_writes_the_log_starts_over_instead_of_growing(database):
    path, _ = database
    checkpointer = Checkpointer(str(path), every=0.05).start()
    writer = sqlite_database(path)
    log = path.parent / "hub.sqlite3-wal"
    try:
        # Each transaction adds ~40 KB to the log; 4,000 of them, back to back, write 160 MB
        # (with synchronous=NORMAL, as the hub writes, a few times faster than any hub does).
        largest = 0
        for _ in range(4000):
            with writing(writer) as cursor:
                cursor.executemany(
                    "INSERT INTO notes (text) VALUES (%s)", [["x" * 4000] for _ in range(10)]
                )
            largest = max(largest, os.path.getsize(log))
        with writer["default"].cursor() as cursor:
            cursor.execute("SELECT count(*) FROM notes")
            assert cursor.fetchone()[0] == 40_000
        # Without the checkpointer the log holds all 160 MB at the end. With it, the log
        # starts over many times; how far it gets before each restart depends on how soon
        # the checkpointer wins the lock from a writer that never pauses (4-35 MB seen).
        assert largest < 80_000_000, f"the log grew to {largest:,} bytes"
    finally:
        checkpointer.stop()
        writer.close_all()
