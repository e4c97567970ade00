"""Batch reads for the group commits: plain statements, values converted as the ORM would.

The group commits read a few things per batch (the tasks an answer changes, locked; the
calls in flight per caller; the policy's windows and breakers). Compiling a queryset costs
more than running these statements, so they are composed here once per shape.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Model

from a2a_core.storage.drivers import (
    column_name,
    composed,
    database,
    driver_cursor,
    fields_of,
)


def _run(
    db: BaseDatabaseWrapper, key: tuple[Any, ...], make: Callable[[], str], params: Sequence[Any]
) -> list[Any]:
    """The rows of the statement `make` composes (`%s` marks), composed once per `key` and
    database and run on the driver's own cursor (`storage.drivers.driver_cursor`: on
    PostgreSQL bound on the server; on SQLite with SQLite's `?` marks, written into the
    statement once, where Django's cursor rewrites them on every call). Composing each read
    and going through Django's cursor took about 3% of a SQLite batch of one's CPU in
    cProfile (bench/README.md, "What a commit costs")."""
    sql = composed(
        ("read", *key, db.alias),
        lambda: make().replace("%s", "?") if db.vendor == "sqlite" else make(),
    )
    with driver_cursor(db) as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())


Converters = list[tuple[int, list[Callable[..., Any]], Any]]
_converters_by_shape: dict[tuple[type[Model], tuple[str, ...], str], Converters] = {}


def _converters(model: type[Model], fields: tuple[str, ...], db: BaseDatabaseWrapper) -> Converters:
    """Per column read back: the backend's and the field's converters, as the ORM applies
    them to query results (datetimes from SQLite text, JSON, ...)."""
    key = (model, fields, db.vendor)
    found = _converters_by_shape.get(key)
    if found is None:
        found = []
        for index, field in enumerate(fields_of(model._meta, fields)):
            column = field.get_col(model._meta.db_table)
            chain = db.ops.get_db_converters(column) + column.get_db_converters(db)
            if chain:
                found.append((index, chain, column))
        _converters_by_shape[key] = found
    return found


def select_rows(
    model: type[Model],
    fields: Sequence[str],
    where: str,
    params: Sequence[Any],
    *,
    order_by: str = "",
    for_update: bool = False,
) -> list[list[Any]]:
    """`SELECT fields FROM model's table WHERE where` (SQL, `%s` for `params`), each value
    converted as the ORM would. `for_update` locks the rows where the database can."""
    db = database()
    fields = tuple(fields)

    def make() -> str:
        quote = db.ops.quote_name
        columns = ", ".join(column_name(f, db) for f in fields_of(model._meta, fields))
        sql = f"SELECT {columns} FROM {quote(model._meta.db_table)} WHERE {where}"
        if order_by:
            sql += f" ORDER BY {quote(order_by)}"
        if for_update and db.features.has_select_for_update:
            sql += " FOR UPDATE"
        return sql

    key = ("select", model, fields, where, order_by, for_update)
    rows = [list(row) for row in _run(db, key, make, params)]
    converters = _converters(model, fields, db)
    if converters:
        for row in rows:
            for index, chain, column in converters:
                for convert in chain:
                    row[index] = convert(row[index], column, db)
    return rows


def select_models[M: Model](
    model: type[M], where: str, params: Sequence[Any], **options: Any
) -> list[M]:
    """Model instances (every concrete field loaded) for `select_rows`' rows."""
    names = tuple(f.attname for f in model._meta.concrete_fields)
    alias = database().alias
    return [
        model.from_db(alias, names, row)
        for row in select_rows(model, names, where, params, **options)
    ]


def marks(count: int) -> str:
    """`%s, %s, ...`: placeholders for an IN list of `count` values."""
    return ", ".join(["%s"] * count)


def models_by_pk[M: Model](
    model: type[M], pks: Sequence[Any], *, for_update: bool = False
) -> dict[Any, M]:
    """The rows of `model` whose primary key is in `pks`, by key. `for_update` locks them,
    in key order (so two batches never wait on each other in a cycle)."""
    keys = sorted(set(pks))
    if not keys:
        return {}
    pk = model._meta.pk
    assert pk is not None
    db = database()
    column = db.ops.quote_name(pk.column or pk.attname)
    where, params = _among(db, column, keys)
    found = select_models(
        model, where, params, order_by=pk.column or pk.attname, for_update=for_update
    )
    return {row.pk: row for row in found}


def count_by(
    model: type[models.Model], column: str, keys: set[Any], states: Sequence[str]
) -> dict[Any, int]:
    """Rows of `model` whose `state` is in `states`, per value of `column` (among `keys`).

    The states are written into the statement, not bound: a prepared statement's generic
    plan then knows them. For the tasks in flight they are written as the condition of the
    partial index `task_inflight` (same values, same order), which both databases then read,
    and which holds only tasks in flight. With the states bound, PostgreSQL's generic plan
    read the caller's entries of the `(caller, state)` index whatever their state: 13,895
    entries, 2.0 ms, after 7,000 calls of one caller, growing with every call it ever made;
    in `bench/throughput.py --backend postgres` the count took 1.0 ms of every accepting
    batch. What it reads now is the tasks in flight and those finished since the last vacuum
    (`storage.postgresql.vacuum`): 0.04 ms in the same bench."""
    if not keys:
        return {}
    db = database()
    q = db.ops.quote_name
    among, params = _among(db, q(column), sorted(keys))

    def make() -> str:
        in_states = f"{q('state')} IN ({', '.join(_literal(s) for s in states)})"
        return (
            f"SELECT {q(column)}, COUNT(*) FROM {q(model._meta.db_table)} "
            f"WHERE {among} AND {in_states} GROUP BY {q(column)}"
        )

    return dict(_run(db, ("count", model, column, among, tuple(states)), make, params))


def _literal(value: str) -> str:
    """A string as an SQL literal (the same on PostgreSQL and SQLite)."""
    return "'" + value.replace("'", "''") + "'"


def _among(db: BaseDatabaseWrapper, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
    """`column` is one of `values`, as SQL and its parameters: on PostgreSQL one array, so
    the statement's text is the same for any number of values (and prepared once)."""
    if db.vendor == "postgresql":
        return f"{column} = ANY(%s)", [list(values)]
    return f"{column} IN ({marks(len(values))})", list(values)
