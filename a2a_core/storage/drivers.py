"""The connection and cursor the write path's statements run on, and the names they use."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any, cast

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field
from django.db.models.options import Options


def database() -> BaseDatabaseWrapper:
    """This thread's connection itself: `django.db.connection` is a proxy that looks it up
    again on every attribute access."""
    return connections[DEFAULT_DB_ALIAS]


def fields_of(meta: Options[Any], names: Sequence[str]) -> list[Field[Any, Any]]:
    return [cast("Field[Any, Any]", meta.get_field(name)) for name in names]


def column_name(field: Field[Any, Any], db: BaseDatabaseWrapper) -> str:
    return db.ops.quote_name(field.column or field.attname)


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
    Django's, at that moment. Nothing changes on SQLite, or outside a transaction.

    For the writes of a group commit that read nothing back until their last statement; an
    ORM `save()` of an existing row must not run inside (it reads the count of rows its
    UPDATE changed, which is not known until the round trip)."""
    if db.vendor != "postgresql" or not db.in_atomic_block:
        yield
        return
    db.validate_no_broken_transaction()
    with db.wrap_database_errors:
        db.ensure_connection()
        with db.connection.pipeline():
            yield
