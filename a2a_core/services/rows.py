"""Reading and writing many rows of one model in one statement, for the group-commit paths.

Django's `bulk_update` builds a CASE expression per field and row, `bulk_create` compiles its
statement through the ORM on every call, and so does every queryset; at the batch sizes the
hub sees, compiling costs more than the statements themselves. These helpers send one
statement, with every value adapted (written) or converted (read) by its field exactly as the
ORM would. Each statement is composed once per model, columns and database, and the writes go
straight to the driver's cursor (Django's wrapper would rewrite the SQL's placeholders for
SQLite on every call); its errors are still Django's (`IntegrityError`, ...).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import Any, cast

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections, models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, Model
from django.db.models.base import ModelState
from django.db.models.options import Options
from django.db.models.signals import post_init, pre_init
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


def _utc_text(value: Any) -> str:
    # What SQLite's `adapt_datetimefield_value` writes for an aware time in UTC.
    return str(value.replace(tzinfo=None))


@cache
def _adapter(field: Field[Any, Any], vendor: str, utc: bool) -> Adapt:
    """`field.get_db_prep_save`, short-circuited for values it would return unchanged — and,
    on a database kept in UTC, for aware datetimes in UTC (`timezone.now()`'s)."""
    prep: Adapt = field.get_db_prep_save
    if isinstance(field, models.ForeignKey):
        relation, target = True, field.target_field
    else:
        relation, target = False, field
    if type(target) is models.DateTimeField and utc:
        if vendor == "sqlite":
            return lambda value, db: (
                _utc_text(value)
                if type(value) is datetime and value.tzinfo is UTC
                else prep(value, db)
            )
        if vendor == "postgresql":
            return lambda value, db: (
                value if type(value) is datetime and value.tzinfo is UTC else prep(value, db)
            )
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


def _adapters(fields: Sequence[Field[Any, Any]], db: BaseDatabaseWrapper) -> tuple[Adapt, ...]:
    utc = settings.USE_TZ and db.timezone_name == "UTC"
    return tuple(_adapter(f, db.vendor, utc) for f in fields)


@dataclass(frozen=True)
class _Statement:
    """A write statement for one model, made once per columns and database: its SQL in the
    driver's own placeholders, the attributes it reads from objects and their adapters."""

    sql: str
    names: tuple[str, ...]
    adapters: tuple[Adapt, ...]

    def values(self, obj: Model, db: BaseDatabaseWrapper) -> list[Any]:
        return [
            adapt(getattr(obj, name), db)
            for adapt, name in zip(self.adapters, self.names, strict=True)
        ]


_statements: dict[tuple[Any, ...], _Statement] = {}


def _statement(
    key: tuple[Any, ...],
    db: BaseDatabaseWrapper,
    make: Callable[[Callable[[int], str]], tuple[str, Sequence[Field[Any, Any]]]],
) -> _Statement:
    """The statement `make` composes (given `marks` for the driver), cached under `key`."""
    key = (*key, db.alias, db.vendor)
    found = _statements.get(key)
    if found is None:
        mark = "?" if db.vendor == "sqlite" else "%s"
        sql, fields = make(lambda count: ", ".join([mark] * count))
        found = _statements[key] = _Statement(
            sql, tuple(f.attname for f in fields), _adapters(fields, db)
        )
    return found


@contextlib.contextmanager
def _driver_cursor(db: BaseDatabaseWrapper) -> Iterator[Any]:
    """The driver's own cursor, its errors raised as Django's (`IntegrityError`, ...) as
    Django's cursor would."""
    db.validate_no_broken_transaction()
    with db.wrap_database_errors:
        cursor = db.connection.cursor()
        try:
            yield cursor
        finally:
            cursor.close()


def _write(db: BaseDatabaseWrapper, sql: str, rows: Sequence[Sequence[Any]]) -> None:
    """Run `sql` once per row of values."""
    with _driver_cursor(db) as cursor:
        cursor.executemany(sql, rows)


def _write_returning(db: BaseDatabaseWrapper, sql: str, values: Sequence[Any]) -> list[Any]:
    """Run `sql` once; return the rows it returns."""
    with _driver_cursor(db) as cursor:
        cursor.execute(sql, values)
        return list(cursor.fetchall())


# Defaults of these types are shared safely by every instance: made once, not per row.
_IMMUTABLE = (str, int, float, bool, type(None))


@dataclass(frozen=True)
class _Blueprint:
    """How to make an unsaved instance of a model (see `new_row`)."""

    # (name, attname, the related model's field it holds or None, default) per field; a
    # default is a value, or a function to call per instance (the flag says which).
    fields: tuple[tuple[str, str, str | None, Any, bool], ...]
    names: frozenset[str]


def _default(field: Field[Any, Any]) -> tuple[Any, bool]:
    """(the field's default, whether it must be made anew per instance)."""
    if not field.has_default() or not callable(field.default):
        value = field.get_default()
        if isinstance(value, _IMMUTABLE):
            return value, False
    return field.get_default, True


@cache
def _blueprint(model: type[Model]) -> _Blueprint:
    fields = tuple(
        (
            f.name,
            f.attname,
            f.target_field.attname if isinstance(f, models.ForeignKey) else None,
            *_default(f),
        )
        for f in model._meta.concrete_fields
        if not f.generated
    )
    return _Blueprint(fields, frozenset(n for name, attname, *_ in fields for n in (name, attname)))


def new_row[M: Model](model: type[M], **values: Any) -> M:
    """An unsaved instance, as `model(**values)` makes it — relations given by object or by
    `<name>_id`, every other field its default — without `Model.__init__`'s general-purpose
    argument handling, which is most of what building a message's row costs."""
    if pre_init.has_listeners(model) or post_init.has_listeners(model):
        return model(**values)
    blueprint = _blueprint(model)
    unknown = values.keys() - blueprint.names
    if unknown:
        raise TypeError(f"{model.__name__}() got unexpected fields: {', '.join(sorted(unknown))}")
    obj = model.__new__(model)
    state = obj._state = ModelState()
    attrs = obj.__dict__
    for name, attname, holds, default, per_instance in blueprint.fields:
        if holds is not None and name in values:
            related = values[name]
            attrs[attname] = None if related is None else getattr(related, holds)
            state.fields_cache[name] = related
        elif attname in values:
            attrs[attname] = values[attname]
        else:
            attrs[attname] = default() if per_instance else default
    return obj


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
    model = type(objs[0])
    meta = model._meta

    def make(marks: Callable[[int], str]) -> tuple[str, Sequence[Field[Any, Any]]]:
        fields = list(meta.concrete_fields)
        columns = ", ".join(_column(f, db) for f in fields)
        table = db.ops.quote_name(meta.db_table)
        return f"INSERT INTO {table} ({columns}) VALUES ({marks(len(fields))})", fields

    statement = _statement(("insert", model), db, make)
    _stamped(objs, meta.concrete_fields)
    _write(db, statement.sql, [statement.values(obj, db) for obj in objs])
    _saved(objs, db)


def insert_returning_pks(objs: Sequence[Model]) -> None:
    """`INSERT` objects whose primary key the database assigns, and set each one's pk.

    One multi-row `INSERT ... RETURNING` per chunk (SQLite >= 3.35 and PostgreSQL return the
    rows in the order they were given, as `bulk_create` relies on too).
    """
    if not objs:
        return
    db = _db()
    model = type(objs[0])
    meta = model._meta
    pk = _pk(meta)
    fields = [f for f in meta.concrete_fields if f is not pk]
    _stamped(objs, fields)
    size = max(1, db.ops.bulk_batch_size(fields, objs))
    for start in range(0, len(objs), size):
        chunk = objs[start : start + size]

        def make(
            marks: Callable[[int], str], rows: int = len(chunk)
        ) -> tuple[str, Sequence[Field[Any, Any]]]:
            columns = ", ".join(_column(f, db) for f in fields)
            table = db.ops.quote_name(meta.db_table)
            values = ", ".join([f"({marks(len(fields))})"] * rows)
            return (
                f"INSERT INTO {table} ({columns}) VALUES {values} RETURNING {_column(pk, db)}",
                fields,
            )

        statement = _statement(("insert returning", model, len(chunk)), db, make)
        params = [value for obj in chunk for value in statement.values(obj, db)]
        keys = _write_returning(db, statement.sql, params)
        for obj, (key,) in zip(chunk, keys, strict=True):
            setattr(obj, pk.attname, key)
    _saved(objs, db)


def insert_values(model: type[Model], fields: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """`INSERT` plain rows of values for `fields`: no model instance for rows nothing reads back."""
    if not rows:
        return
    db = _db()
    meta = model._meta

    def make(marks: Callable[[int], str]) -> tuple[str, Sequence[Field[Any, Any]]]:
        columns = _fields(meta, fields)
        names = ", ".join(_column(c, db) for c in columns)
        table = db.ops.quote_name(meta.db_table)
        return f"INSERT INTO {table} ({names}) VALUES ({marks(len(columns))})", columns

    statement = _statement(("insert values", model, tuple(fields)), db, make)
    adapters = statement.adapters
    _write(
        db,
        statement.sql,
        [[adapt(value, db) for adapt, value in zip(adapters, row, strict=True)] for row in rows],
    )


def update_values(
    model: type[Model], fields: Sequence[str], rows: Sequence[tuple[Any, Sequence[Any]]]
) -> None:
    """`UPDATE ... SET fields WHERE pk` from plain (pk, values) rows."""
    if not rows:
        return
    db = _db()
    meta = model._meta

    def make(marks: Callable[[int], str]) -> tuple[str, Sequence[Field[Any, Any]]]:
        columns = _fields(meta, fields)
        pk = _pk(meta)
        assignments = ", ".join(f"{_column(c, db)} = {marks(1)}" for c in columns)
        table = db.ops.quote_name(meta.db_table)
        return (
            f"UPDATE {table} SET {assignments} WHERE {_column(pk, db)} = {marks(1)}",
            [*columns, pk],
        )

    statement = _statement(("update", model, tuple(fields)), db, make)
    adapters = statement.adapters
    _write(
        db,
        statement.sql,
        [
            [adapt(v, db) for adapt, v in zip(adapters, (*values, key), strict=True)]
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
