"""The PostgreSQL writer's statements: a batch's rows of one table in one statement.

Every row of a batch goes in one array per column, unpacked by `unnest` on the server:

    INSERT INTO t (a, b) SELECT * FROM unnest(%s::text[], %s::jsonb[]) RETURNING id
    UPDATE t SET a = v.a FROM unnest(%s::text[], %s::bigint[]) AS v(a, id) WHERE t.id = v.id

One statement whatever the batch size, so its text is composed and parsed once per process
and prepared on each connection (server-side binding, `storage.rows.driver_cursor`); psycopg
builds the arrays in C. The same batch through `executemany`, even pipelined, went through
psycopg's pipeline machinery in Python once per row: the two hot group commits cost
1.29 + 1.32 ms of CPU per call at eight calls a batch that way, N + N ms this way
(/tmp-free micro-benchmark: `writes_commit` of accept and record batches, events off).

Values are cast to each column's type without its length (`varchar`, not `varchar(64)`): an
explicit cast would cut an over-long value short, where the column's own check refuses it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field

from a2a_core.storage.drivers import column_name, driver_cursor


@cache
def _array_type(field: Field[Any, Any], vendor: str, db_type: str) -> str:
    return re.sub(r"\(.*\)", "", db_type) + "[]"


def _arrays(fields: Sequence[Field[Any, Any]], db: BaseDatabaseWrapper) -> str:
    return ", ".join(f"%s::{_array_type(f, db.vendor, f.db_type(db) or 'text')}" for f in fields)


def _columns(rows: Sequence[Sequence[Any]], width: int) -> list[list[Any]]:
    return [list(column) for column in zip(*rows, strict=True)] if rows else [[]] * width


_sql: dict[tuple[Any, ...], str] = {}


def _statement(key: tuple[Any, ...], make: Any) -> str:
    found = _sql.get(key)
    if found is None:
        found = _sql[key] = make()
    return found


def insert(
    db: BaseDatabaseWrapper,
    table: str,
    fields: Sequence[Field[Any, Any]],
    rows: Sequence[Sequence[Any]],
    *,
    returning: Field[Any, Any] | None = None,
) -> list[Any]:
    """INSERT the rows (values for `fields`, adapted); the `returning` column of each row,
    in the rows' order."""
    sql = _statement(
        ("insert", table, tuple(fields), returning, db.alias),
        lambda: (
            f"INSERT INTO {db.ops.quote_name(table)} "
            f"({', '.join(column_name(f, db) for f in fields)}) "
            f"SELECT * FROM unnest({_arrays(fields, db)})"
            + (f" RETURNING {column_name(returning, db)}" if returning is not None else "")
        ),
    )
    with driver_cursor(db) as cursor:
        cursor.execute(sql, _columns(rows, len(fields)))
        return [row[0] for row in cursor.fetchall()] if returning is not None else []


def update(
    db: BaseDatabaseWrapper,
    table: str,
    fields: Sequence[Field[Any, Any]],
    key: Field[Any, Any],
    rows: Sequence[Sequence[Any]],
) -> None:
    """UPDATE `fields` of the rows whose `key` is the last value of each row (adapted)."""
    names = [f"c{i}" for i in range(len(fields))]

    def make() -> str:
        quote = db.ops.quote_name
        assignments = ", ".join(
            f"{column_name(f, db)} = v.{name}" for f, name in zip(fields, names, strict=True)
        )
        return (
            f"UPDATE {quote(table)} AS t SET {assignments} "
            f"FROM unnest({_arrays([*fields, key], db)}) AS v({', '.join(names)}, k) "
            f"WHERE t.{column_name(key, db)} = v.k"
        )

    sql = _statement(("update", table, tuple(fields), key, db.alias), make)
    with driver_cursor(db) as cursor:
        cursor.execute(sql, _columns(rows, len(fields) + 1))
