"""The PostgreSQL writer's statements: a batch's rows of one table in one statement.

The contract: values arrive adapted by their fields (storage.rows) and leave as one JSON
document, an array of arrays, read out on the server and cast to each column's type without
its length (`varchar`, not `varchar(64)`), so an over-long value is refused by the column, never
cut short. A JSON column's value is the JSON itself; None is SQL NULL, as Django writes it.

    INSERT INTO t (a, b) SELECT (r->>0)::varchar, NULLIF(r->1, 'null')
        FROM jsonb_array_elements(%s::jsonb) AS r RETURNING id
    UPDATE t SET a = v.c0 FROM (SELECT (r->>0)::varchar, (r->>1)::bigint
        FROM jsonb_array_elements(%s::jsonb) AS r) AS v(c0, k)
        WHERE t.id = v.k AND t.id = ANY(%s::bigint[])

One statement whatever the batch size: parsed once per process, prepared on each connection
(`storage.drivers.driver_cursor`). Figure: a third less CPU per group commit than one array per
column through `unnest` (bench/README.md, "The PostgreSQL writer's statements").
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import datetime
from functools import cache
from typing import Any
from uuid import UUID

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field
from psycopg.types.json import Jsonb

from a2a_core.storage.drivers import column_name, composed, driver_cursor


@cache
def _base_type(db_type: str) -> str:
    return re.sub(r"\(.*\)", "", db_type)


def _selects(fields: Sequence[Field[Any, Any]], db: BaseDatabaseWrapper) -> str:
    """Each column read from a row of the JSON document: `r->>i` cast to the column's type
    (without its length), or the JSON value itself for a jsonb column."""
    out = []
    for i, field in enumerate(fields):
        kind = _base_type(field.db_type(db) or "text")
        out.append(f"NULLIF(r->{i}, 'null')" if kind == "jsonb" else f"(r->>{i})::{kind}")
    return ", ".join(out)


def _encode(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Jsonb):
        return value.obj
    if isinstance(value, UUID):
        return str(value)
    raise TypeError(f"cannot send {type(value).__name__} in a batch")


def _document(rows: Sequence[Sequence[Any]]) -> str:
    return json.dumps(rows, default=_encode, separators=(",", ":"))


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
    sql = composed(
        ("insert", table, db.alias, returning and returning.attname, *[f.attname for f in fields]),
        lambda: (
            f"INSERT INTO {db.ops.quote_name(table)} "
            f"({', '.join(column_name(f, db) for f in fields)}) "
            f"SELECT {_selects(fields, db)} FROM jsonb_array_elements(%s::jsonb) AS r"
            + (f" RETURNING {column_name(returning, db)}" if returning is not None else "")
        ),
    )
    with driver_cursor(db) as cursor:
        cursor.execute(sql, [_document(rows)])
        return [row[0] for row in cursor.fetchall()] if returning is not None else []


def update(
    db: BaseDatabaseWrapper,
    table: str,
    fields: Sequence[Field[Any, Any]],
    key: Field[Any, Any],
    rows: Sequence[Sequence[Any]],
) -> None:
    """UPDATE `fields` of the rows whose `key` is the last value of each row (adapted).

    The keys also travel as an array (`t.key = ANY(...)`), which PostgreSQL can count. Of a
    JSON document's rows it guesses 100; joined to a table it believed small (never analysed,
    or grown since its plan was made), 100 lookups by key looked dearer than reading the whole
    table, so every batch recording answers read all the tasks and all the messages. With
    the array, it reads the batch's rows by key. `bench/throughput.py
    --backend sqlite postgres --concurrency 16 --rounds 2 --seconds 5`, three alternating
    pairs, old code against new: rows read by sequential scans in a run 1.74-1.86 M tasks and
    2.50-2.90 M messages against 0.68-0.80 M and 0.45-0.52 M; PostgreSQL's CPU per call
    0.79-0.97 ms against 0.61-0.63 ms; 262-274 calls/s against 322-341
    (`tests/a2a_core/storage/test_postgresql_plans.py` shows it through a hub worker)."""
    names = [f"c{i}" for i in range(len(fields))]

    def make() -> str:
        quote = db.ops.quote_name
        column, array_of = column_name(key, db), _base_type(key.db_type(db) or "text") + "[]"
        assignments = ", ".join(
            f"{column_name(f, db)} = v.{name}" for f, name in zip(fields, names, strict=True)
        )
        return (
            f"UPDATE {quote(table)} AS t SET {assignments} "
            f"FROM (SELECT {_selects([*fields, key], db)} "
            f"FROM jsonb_array_elements(%s::jsonb) AS r) AS v({', '.join(names)}, k) "
            f"WHERE t.{column} = v.k AND t.{column} = ANY(%s::{array_of})"
        )

    sql = composed(("update", table, db.alias, key.attname, *[f.attname for f in fields]), make)
    keys = [str(row[-1]) if isinstance(row[-1], UUID) else row[-1] for row in rows]
    with driver_cursor(db) as cursor:
        cursor.execute(sql, [_document(rows), keys])
