"""The connection and cursor the write path's statements run on, the names they use, and a group
commit's transaction (on PostgreSQL one pipeline from BEGIN to COMMIT)."""

from __future__ import annotations

import contextlib
import select
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field
from django.db.models.options import Options

if TYPE_CHECKING:
    from psycopg import Connection, Pipeline


def database() -> BaseDatabaseWrapper:
    """This thread's connection itself: `django.db.connection` is a proxy that looks it up
    again on every attribute access."""
    return connections[DEFAULT_DB_ALIAS]


def fields_of(meta: Options[Any], names: Sequence[str]) -> list[Field[Any, Any]]:
    return [cast("Field[Any, Any]", meta.get_field(name)) for name in names]


def column_name(field: Field[Any, Any], db: BaseDatabaseWrapper) -> str:
    return db.ops.quote_name(field.column or field.attname)


_composed: dict[tuple[Any, ...], str] = {}


def composed(key: tuple[Any, ...], make: Callable[[], str]) -> str:
    """The statement `make` composes, composed once per `key` in this process (a key names
    its shape and database: the statement's text is then the same each time, and PostgreSQL
    prepares it once per connection)."""
    found = _composed.get(key)
    if found is None:
        found = _composed[key] = make()
    return found


@contextlib.contextmanager
def driver_cursor(db: BaseDatabaseWrapper) -> Iterator[Any]:
    """The driver's own cursor, its errors raised as Django's (`IntegrityError`, ...) as
    Django's cursor would.

    On PostgreSQL, a cursor that binds values on the server (Django's binds them into the SQL
    text on the client, quoting every value in Python): each statement's text is parsed once
    per process and, from its fifth run on a connection, prepared there, so a batch sends only
    values (see `storage.postgres`)."""
    db.validate_no_broken_transaction()
    with db.wrap_database_errors:
        if db.connection is None:
            db.ensure_connection()
        if db.vendor == "postgresql":
            import psycopg

            cursor = psycopg.Cursor(db.connection)
        else:
            cursor = db.connection.cursor()
        try:
            yield cursor
        finally:
            cursor.close()


@contextlib.contextmanager
def sent_together(db: BaseDatabaseWrapper) -> Iterator[None]:
    """The statements run inside, within a transaction, go to PostgreSQL together (psycopg's
    pipeline mode): they travel when a result is read (a `RETURNING`'s keys, a query's rows)
    or when the block ends, in one round trip, not one each. Their errors are raised as
    Django's, at that moment. Nothing changes on SQLite, outside a transaction, or inside a
    pipeline already open (`batch_transaction`'s: a pipeline entered again would sync).

    For the writes of a group commit that read nothing back until their last statement; an
    ORM `save()` of an existing row must not run inside (it reads the count of rows its
    UPDATE changed, which is not known until the round trip)."""
    if db.vendor != "postgresql" or not db.in_atomic_block or _in_pipeline(db):
        yield
        return
    db.validate_no_broken_transaction()
    with db.wrap_database_errors:
        db.ensure_connection()
        with db.connection.pipeline():
            yield


def hung_up(connection: Connection[Any]) -> bool:
    """Whether PostgreSQL has closed this idle connection since it was last used (a restart of
    the server, a failover, `pg_terminate_backend`, an idle timeout): the server then sends
    its reason and closes, so the socket has something to read while no query is pending. A
    look at the socket, no round trip. What arrived is read while there is more: the reason
    first, then the end of the stream, which marks the connection broken (a notification is
    read the same way and leaves it as it was)."""
    from psycopg import OperationalError, pq

    if connection.closed or connection.broken:
        return True
    pgconn = connection.pgconn
    try:
        for _ in range(3):
            if not select.select([pgconn.socket], [], [], 0)[0]:
                break
            pgconn.consume_input()
    except (OSError, ValueError, OperationalError):
        return True
    return pgconn.status != pq.ConnStatus.OK


def close_if_hung_up(db: BaseDatabaseWrapper) -> None:
    """For a thread that keeps its connection between jobs: close it if PostgreSQL has closed
    it (`hung_up`), so the next statement opens another instead of failing."""
    if db.vendor == "postgresql" and db.connection is not None and hung_up(db.connection):
        db.close()


def _in_pipeline(db: BaseDatabaseWrapper) -> bool:
    from psycopg import pq

    connection = db.connection
    return connection is not None and connection.pgconn.pipeline_status != pq.PipelineStatus.OFF


@contextlib.contextmanager
def batch_transaction() -> Iterator[None]:
    """A group commit's transaction (`transaction.atomic`), in as few round trips as the
    database allows.

    On PostgreSQL the whole transaction is one pipeline: its BEGIN travels with its first
    statement and its COMMIT with its last writes, so the writer waits for the server only
    where it reads a result (a locking read, a `RETURNING`) and once at the end. An accept
    took five trips (BEGIN, the calls in flight, the rows, the pipeline's sync, COMMIT) and
    now takes three; the record of an answer took five (BEGIN, the tasks locked, the rows,
    sync, COMMIT), now three. psycopg opens a transaction with a BEGIN and a sync of its own
    (a trip); here the connection stays in autocommit for psycopg while Django's atomic block
    is open, and the BEGIN and COMMIT are statements of the pipeline. A statement the ORM
    runs inside is synced at once, so its rows, its row count and its error are there when it
    returns, as the ORM expects. Errors are raised as Django's, the transaction rolled back.

    What the trips cost depends on how far the database is. On one machine (0.27 ms a trip)
    alternating runs of `bench/throughput.py --backend postgres` were within their spread at
    concurrency 1 and 16. With PostgreSQL 2.8 ms away (`bench/slow_link.py`), two alternating
    runs each: concurrency 1 p50 48.4 / 77.8 ms before, 34.0 / 41.0 ms after (20.5 / 11.5
    against 29.5 / 24.0 calls/s), concurrency 16 111.5 / 82.2 against 114.5 / 113.0 calls/s.

    Elsewhere — SQLite, or inside another transaction (a test's) — `transaction.atomic()`.
    """
    from django.db import transaction

    db = database()
    outermost = not db.in_atomic_block
    with transaction.atomic(using=db.alias):
        if db.vendor != "postgresql" or not outermost:
            yield
            return
        db.ensure_connection()
        connection = db.connection
        connection.autocommit = True
        try:
            with db.wrap_database_errors, connection.pipeline() as pipeline:
                connection.execute("BEGIN", prepare=False)
                with db.execute_wrapper(_synced(db, pipeline)):
                    yield
                connection.execute("COMMIT", prepare=False)
        except BaseException:
            # Django's atomic block rolls back too, and drops a connection that cannot.
            with contextlib.suppress(Exception):
                connection.rollback()
            raise
        finally:
            with contextlib.suppress(Exception):
                connection.autocommit = False


def _synced(db: BaseDatabaseWrapper, pipeline: Pipeline) -> Callable[..., Any]:
    """An ORM statement's wrapper (`execute_wrapper`): the pipeline synced after it, its
    error raised as Django's."""

    def execute(run: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        result = run(sql, params, many, context)
        with db.wrap_database_errors:
            pipeline.sync()
        return result

    return execute
