"""Reading and writing many rows of one model in one statement, for the group-commit paths.

Django's `bulk_update` builds a CASE expression per field and row, `bulk_create` compiles its
statement through the ORM on every call, and so does every queryset; at the batch sizes the
hub sees, compiling costs more than the statements themselves. These helpers send one
statement, with every value adapted (written) or converted (read) by its field exactly as the
ORM would.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache
from typing import Any, cast

from django.db import connection
from django.db.models import Field, Model
from django.db.models.options import Options
from django.utils import timezone


def _fields(meta: Options[Any], names: Sequence[str]) -> list[Field[Any, Any]]:
    return [cast("Field[Any, Any]", meta.get_field(name)) for name in names]


def _pk(meta: Options[Any]) -> Field[Any, Any]:
    assert meta.pk is not None
    return meta.pk


def _column(field: Field[Any, Any]) -> str:
    return connection.ops.quote_name(field.column or field.attname)


def _execute(sql: str, params: list[list[Any]]) -> None:
    with connection.cursor() as cursor:
        cursor.executemany(sql, params)


def _stamped(objs: Sequence[Model], fields: Sequence[Field[Any, Any]]) -> None:
    """Fill `auto_now`/`auto_now_add` fields as `save()` would."""
    now = timezone.now()
    stamped = [
        f for f in fields if getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False)
    ]
    for obj in objs:
        for f in stamped:
            setattr(obj, f.attname, now)


def _saved(objs: Sequence[Model]) -> None:
    for obj in objs:
        # As Model.save() does: a later save() must UPDATE these rows, not insert them again.
        obj._state.adding = False
        obj._state.db = connection.alias


@cache
def _converters(
    model: type[Model], fields: tuple[str, ...], vendor: str
) -> list[tuple[int, list[Callable[..., Any]], Any]]:
    """Per column read back: the backend's and the field's converters, as the ORM applies
    them to query results (datetimes from SQLite text, JSON, ...)."""
    found = []
    for index, field in enumerate(_fields(model._meta, fields)):
        column = field.get_col(model._meta.db_table)
        chain = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
        if chain:
            found.append((index, chain, column))
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
    quote = connection.ops.quote_name
    columns = ", ".join(_column(f) for f in _fields(model._meta, fields))
    sql = f"SELECT {columns} FROM {quote(model._meta.db_table)} WHERE {where}"
    if order_by:
        sql += f" ORDER BY {quote(order_by)}"
    if for_update and connection.features.has_select_for_update:
        sql += " FOR UPDATE"
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = [list(row) for row in cursor.fetchall()]
    converters = _converters(model, tuple(fields), connection.vendor)
    if converters:
        for row in rows:
            for index, chain, column in converters:
                for convert in chain:
                    row[index] = convert(row[index], column, connection)
    return rows


def select_models[M: Model](
    model: type[M], where: str, params: Sequence[Any], **options: Any
) -> list[M]:
    """Model instances (every concrete field loaded) for `select_rows`' rows."""
    names = tuple(f.attname for f in model._meta.concrete_fields)
    return [
        model.from_db(connection.alias, names, row)
        for row in select_rows(model, names, where, params, **options)
    ]


def marks(count: int) -> str:
    """`%s, %s, ...`: placeholders for an IN list of `count` values."""
    return ", ".join(["%s"] * count)


def insert_rows(objs: Sequence[Model]) -> None:
    """`INSERT` objects whose primary key is already set, as one executemany.

    `auto_now`/`auto_now_add` fields are filled in as `save()` would; nothing is read back.
    """
    if not objs:
        return
    meta = type(objs[0])._meta
    fields = list(meta.concrete_fields)
    _stamped(objs, fields)
    quote = connection.ops.quote_name
    columns = ", ".join(_column(f) for f in fields)
    marks = ", ".join(["%s"] * len(fields))
    _execute(
        f"INSERT INTO {quote(meta.db_table)} ({columns}) VALUES ({marks})",
        [[f.get_db_prep_save(getattr(obj, f.attname), connection) for f in fields] for obj in objs],
    )
    _saved(objs)


def insert_returning_pks(objs: Sequence[Model]) -> None:
    """`INSERT` objects whose primary key the database assigns, and set each one's pk.

    One multi-row `INSERT ... RETURNING` per chunk (SQLite >= 3.35 and PostgreSQL return the
    rows in the order they were given, as `bulk_create` relies on too).
    """
    if not objs:
        return
    meta = type(objs[0])._meta
    pk = _pk(meta)
    fields = [f for f in meta.concrete_fields if f is not pk]
    _stamped(objs, fields)
    quote = connection.ops.quote_name
    columns = ", ".join(_column(f) for f in fields)
    row = "(" + ", ".join(["%s"] * len(fields)) + ")"
    size = max(1, connection.ops.bulk_batch_size(fields, objs))
    for start in range(0, len(objs), size):
        chunk = objs[start : start + size]
        params = [
            f.get_db_prep_save(getattr(obj, f.attname), connection) for obj in chunk for f in fields
        ]
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {quote(meta.db_table)} ({columns}) VALUES "
                f"{', '.join([row] * len(chunk))} RETURNING {_column(pk)}",
                params,
            )
            keys = cursor.fetchall()
        for obj, (key,) in zip(chunk, keys, strict=True):
            setattr(obj, pk.attname, key)
    _saved(objs)


def insert_values(model: type[Model], fields: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """`INSERT` plain rows of values for `fields`: no model instance for rows nothing reads back."""
    if not rows:
        return
    meta = model._meta
    columns = _fields(meta, fields)
    quote = connection.ops.quote_name
    names = ", ".join(_column(c) for c in columns)
    marks = ", ".join(["%s"] * len(columns))
    _execute(
        f"INSERT INTO {quote(meta.db_table)} ({names}) VALUES ({marks})",
        [
            [c.get_db_prep_save(value, connection) for c, value in zip(columns, row, strict=True)]
            for row in rows
        ],
    )


def update_values(
    model: type[Model], fields: Sequence[str], rows: Sequence[tuple[Any, Sequence[Any]]]
) -> None:
    """`UPDATE ... SET fields WHERE pk` from plain (pk, values) rows."""
    if not rows:
        return
    meta = model._meta
    columns = _fields(meta, fields)
    pk = _pk(meta)
    quote = connection.ops.quote_name
    assignments = ", ".join(f"{_column(c)} = %s" for c in columns)
    _execute(
        f"UPDATE {quote(meta.db_table)} SET {assignments} WHERE {_column(pk)} = %s",
        [
            [c.get_db_prep_save(v, connection) for c, v in zip(columns, values, strict=True)]
            + [pk.get_db_prep_save(key, connection)]
            for key, values in rows
        ],
    )


def update_rows(objs: Sequence[Model], fields: Sequence[str]) -> None:
    """`UPDATE ... SET fields WHERE pk` for each object (set `auto_now` fields first)."""
    if not objs:
        return
    meta = type(objs[0])._meta
    columns = _fields(meta, fields)
    update_values(
        type(objs[0]),
        fields,
        [(obj.pk, [getattr(obj, c.attname) for c in columns]) for obj in objs],
    )
