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

from django.db import DEFAULT_DB_ALIAS, connections, models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, Model
from django.db.models.options import Options
from django.utils import timezone

Adapt = Callable[[Any, BaseDatabaseWrapper], Any]

# Fields whose `get_db_prep_save` returns a value of this exact type unchanged (and None as
# None); these rows are written once or twice per call, so skipping the call chain counts.
_UNCHANGED: dict[type[Field[Any, Any]], type] = {
    models.CharField: str,
    models.TextField: str,
    models.SlugField: str,
    models.BooleanField: bool,
}
# Integers too, where the backend passes them on as they are (PostgreSQL wraps them in
# typed parameters).
_UNCHANGED_INTEGERS: dict[type[Field[Any, Any]], type] = {
    models.IntegerField: int,
    models.PositiveIntegerField: int,
    models.PositiveSmallIntegerField: int,
    models.SmallIntegerField: int,
    models.BigIntegerField: int,
    models.AutoField: int,
    models.BigAutoField: int,
}


def _db() -> BaseDatabaseWrapper:
    """This thread's connection itself: `django.db.connection` is a proxy that looks it up
    again on every attribute access."""
    return connections[DEFAULT_DB_ALIAS]


def _fields(meta: Options[Any], names: Sequence[str]) -> list[Field[Any, Any]]:
    return [cast("Field[Any, Any]", meta.get_field(name)) for name in names]


def _pk(meta: Options[Any]) -> Field[Any, Any]:
    assert meta.pk is not None
    return meta.pk


def _column(field: Field[Any, Any], db: BaseDatabaseWrapper) -> str:
    return db.ops.quote_name(field.column or field.attname)


@cache
def _adapter(field: Field[Any, Any], vendor: str) -> Adapt:
    """`field.get_db_prep_save`, short-circuited for values it would return unchanged."""
    prep: Adapt = field.get_db_prep_save
    if isinstance(field, models.ForeignKey):
        relation, target = True, field.target_field
    else:
        relation, target = False, field
    unchanged = _UNCHANGED | (_UNCHANGED_INTEGERS if vendor == "sqlite" else {})
    plain = unchanged.get(type(target))
    if plain is None:
        return prep

    def adapt(value: Any, db: BaseDatabaseWrapper) -> Any:
        # A relation turns "" into NULL: left to the field.
        if value is None or (type(value) is plain and not (relation and value == "")):
            return value
        return prep(value, db)

    return adapt


def _adapters(fields: Sequence[Field[Any, Any]], db: BaseDatabaseWrapper) -> list[Adapt]:
    return [_adapter(f, db.vendor) for f in fields]


def _execute(sql: str, params: list[list[Any]], db: BaseDatabaseWrapper) -> None:
    with db.cursor() as cursor:
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


def _saved(objs: Sequence[Model], db: BaseDatabaseWrapper) -> None:
    for obj in objs:
        # As Model.save() does: a later save() must UPDATE these rows, not insert them again.
        obj._state.adding = False
        obj._state.db = db.alias


Converters = list[tuple[int, list[Callable[..., Any]], Any]]
_converters_by_shape: dict[tuple[type[Model], tuple[str, ...], str], Converters] = {}


def _converters(model: type[Model], fields: tuple[str, ...], db: BaseDatabaseWrapper) -> Converters:
    """Per column read back: the backend's and the field's converters, as the ORM applies
    them to query results (datetimes from SQLite text, JSON, ...)."""
    key = (model, fields, db.vendor)
    found = _converters_by_shape.get(key)
    if found is None:
        found = []
        for index, field in enumerate(_fields(model._meta, fields)):
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
    db = _db()
    quote = db.ops.quote_name
    columns = ", ".join(_column(f, db) for f in _fields(model._meta, fields))
    sql = f"SELECT {columns} FROM {quote(model._meta.db_table)} WHERE {where}"
    if order_by:
        sql += f" ORDER BY {quote(order_by)}"
    if for_update and db.features.has_select_for_update:
        sql += " FOR UPDATE"
    with db.cursor() as cursor:
        cursor.execute(sql, params)
        rows = [list(row) for row in cursor.fetchall()]
    converters = _converters(model, tuple(fields), db)
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
    alias = _db().alias
    return [
        model.from_db(alias, names, row)
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
    db = _db()
    meta = type(objs[0])._meta
    fields = list(meta.concrete_fields)
    _stamped(objs, fields)
    columns = ", ".join(_column(f, db) for f in fields)
    adapters = _adapters(fields, db)
    names = [f.attname for f in fields]
    _execute(
        f"INSERT INTO {db.ops.quote_name(meta.db_table)} ({columns}) VALUES ({marks(len(fields))})",
        [
            [adapt(getattr(obj, name), db) for adapt, name in zip(adapters, names, strict=True)]
            for obj in objs
        ],
        db,
    )
    _saved(objs, db)


def insert_returning_pks(objs: Sequence[Model]) -> None:
    """`INSERT` objects whose primary key the database assigns, and set each one's pk.

    One multi-row `INSERT ... RETURNING` per chunk (SQLite >= 3.35 and PostgreSQL return the
    rows in the order they were given, as `bulk_create` relies on too).
    """
    if not objs:
        return
    db = _db()
    meta = type(objs[0])._meta
    pk = _pk(meta)
    fields = [f for f in meta.concrete_fields if f is not pk]
    _stamped(objs, fields)
    columns = ", ".join(_column(f, db) for f in fields)
    adapters = _adapters(fields, db)
    names = [f.attname for f in fields]
    row = f"({marks(len(fields))})"
    size = max(1, db.ops.bulk_batch_size(fields, objs))
    for start in range(0, len(objs), size):
        chunk = objs[start : start + size]
        params = [
            adapt(getattr(obj, name), db)
            for obj in chunk
            for adapt, name in zip(adapters, names, strict=True)
        ]
        with db.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {db.ops.quote_name(meta.db_table)} ({columns}) VALUES "
                f"{', '.join([row] * len(chunk))} RETURNING {_column(pk, db)}",
                params,
            )
            keys = cursor.fetchall()
        for obj, (key,) in zip(chunk, keys, strict=True):
            setattr(obj, pk.attname, key)
    _saved(objs, db)


def insert_values(model: type[Model], fields: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """`INSERT` plain rows of values for `fields`: no model instance for rows nothing reads back."""
    if not rows:
        return
    db = _db()
    meta = model._meta
    columns = _fields(meta, fields)
    adapters = _adapters(columns, db)
    names = ", ".join(_column(c, db) for c in columns)
    _execute(
        f"INSERT INTO {db.ops.quote_name(meta.db_table)} ({names}) VALUES ({marks(len(columns))})",
        [[adapt(value, db) for adapt, value in zip(adapters, row, strict=True)] for row in rows],
        db,
    )


def update_values(
    model: type[Model], fields: Sequence[str], rows: Sequence[tuple[Any, Sequence[Any]]]
) -> None:
    """`UPDATE ... SET fields WHERE pk` from plain (pk, values) rows."""
    if not rows:
        return
    db = _db()
    meta = model._meta
    columns = _fields(meta, fields)
    adapters = _adapters(columns, db)
    pk = _pk(meta)
    adapt_pk = _adapter(pk, db.vendor)
    assignments = ", ".join(f"{_column(c, db)} = %s" for c in columns)
    _execute(
        f"UPDATE {db.ops.quote_name(meta.db_table)} SET {assignments} WHERE {_column(pk, db)} = %s",
        [
            [adapt(v, db) for adapt, v in zip(adapters, values, strict=True)] + [adapt_pk(key, db)]
            for key, values in rows
        ],
        db,
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
