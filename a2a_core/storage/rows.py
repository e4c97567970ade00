"""Reading and writing many rows of one model in one statement, for the group-commit paths.

The contract: a model written here is saved without `Model.save()`, without the `pre_save` and
`post_save` signals and without its fields' `pre_save()`, except `auto_now`/`auto_now_add`,
which are filled in as `save()` would; `new_row` skips `Model.__init__` unless the model has
`pre_init`/`post_init` listeners. Each value is still adapted by its field's
`get_db_prep_save` (read: converted by its `from_db_value`), so what is stored is what the
ORM would store. A model that gains save-time behaviour of its own must not be written here:
`save_time_behaviour` names it, and tests/a2a_core/storage/test_row_contract.py fails for
every model the hot path writes until the behaviour moves or the model leaves this layer.

Why: at the hub's batch sizes, compiling an ORM statement costs more than running it (one
statement per batch, composed once per model: bench/README.md, "What a commit costs").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import Any

from django.conf import settings
from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, Model
from django.db.models.base import ModelState
from django.db.models.options import Options
from django.db.models.signals import post_init, post_save, pre_init, pre_save
from django.utils import timezone

from a2a_core.storage import postgres
from a2a_core.storage.drivers import (
    column_name,
    database,
    driver_cursor,
    fields_of,
    sent_together,
)

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


def written_together() -> AbstractContextManager[None]:
    """A block of writes sent to the database in one round trip where it can (PostgreSQL's
    pipeline: `storage.drivers.sent_together`), the trip made when the block ends or when a
    statement's result is read; put the one write whose result is read (`insert_returning_pks`)
    last. A group commit's writes took one round trip each: four for the record of an answer
    (its reply, its event, the task, the request's delivery state), two for an accept. In a
    group commit's own transaction (`storage.drivers.batch_transaction`) the whole
    transaction is one pipeline already, and the block adds no trip of its own."""
    return sent_together(database())


def _pk(meta: Options[Any]) -> Field[Any, Any]:
    assert meta.pk is not None
    return meta.pk


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


_adapter_sets: dict[tuple[Any, ...], tuple[Adapt, ...]] = {}


def _adapters(fields: Sequence[Field[Any, Any]], db: BaseDatabaseWrapper) -> tuple[Adapt, ...]:
    """The fields' adapters, found once per model, columns and database, keyed by names (a
    field's own hash is computed in Python). Figure: 10-15% less CPU a call in batches of eight
    (bench/README.md, "What a commit costs")."""
    key = (fields[0].model if fields else None, db.alias, *[f.attname for f in fields])
    found = _adapter_sets.get(key)
    if found is None:
        utc = settings.USE_TZ and db.timezone_name == "UTC"
        found = _adapter_sets[key] = tuple(_adapter(f, db.vendor, utc) for f in fields)
    return found


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


def _write(db: BaseDatabaseWrapper, sql: str, rows: Sequence[Sequence[Any]]) -> None:
    """Run `sql` once per row of values (on PostgreSQL, pipelined: one round trip)."""
    with driver_cursor(db) as cursor:
        cursor.executemany(sql, rows)


def _write_returning(db: BaseDatabaseWrapper, sql: str, values: Sequence[Any]) -> list[Any]:
    """Run `sql` once; return the rows it returns."""
    with driver_cursor(db) as cursor:
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


# Fields' own `pre_save` that the layer does as `save()` would (auto_now, auto_now_add).
_STAMPING_PRE_SAVES = {
    models.Field.pre_save,
    models.DateField.pre_save,
    models.DateTimeField.pre_save,
}


def save_time_behaviour(model: type[Model]) -> list[str]:
    """What `model.save()` would do that writing it here skips (empty when nothing): the
    contract in this module's docstring, checked."""
    skipped = []
    if model.save is not Model.save:
        skipped.append(f"{model.__name__}.save() is overridden")
    for signal, name in ((pre_save, "pre_save"), (post_save, "post_save")):
        if signal.has_listeners(model):
            skipped.append(f"{name} has receivers for {model.__name__}")
    for field in model._meta.concrete_fields:
        if type(field).pre_save not in _STAMPING_PRE_SAVES:
            skipped.append(f"{model.__name__}.{field.name} has a pre_save() of its own")
    return skipped


@cache
def _auto_now(model: type[Model]) -> tuple[str, ...]:
    """The attnames of the model's `auto_now`/`auto_now_add` fields."""
    return tuple(
        f.attname
        for f in model._meta.concrete_fields
        if getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False)
    )


def _stamped(objs: Sequence[Model]) -> None:
    """Fill `auto_now`/`auto_now_add` fields as `save()` would."""
    stamped = _auto_now(type(objs[0]))
    if not stamped:
        return
    now = timezone.now()
    for obj in objs:
        for attname in stamped:
            setattr(obj, attname, now)


def _saved(objs: Sequence[Model], db: BaseDatabaseWrapper) -> None:
    for obj in objs:
        # As Model.save() does: a later save() must UPDATE these rows, not insert them again.
        obj._state.adding = False
        obj._state.db = db.alias


def _values(
    db: BaseDatabaseWrapper, fields: Sequence[Field[Any, Any]], rows: Sequence[Sequence[Any]]
) -> list[list[Any]]:
    """Plain rows of values for `fields`, each adapted as the ORM would write it."""
    adapters = _adapters(fields, db)
    return [[adapt(value, db) for adapt, value in zip(adapters, row, strict=True)] for row in rows]


def insert_rows(objs: Sequence[Model]) -> None:
    """`INSERT` objects whose primary key is already set, in one statement (PostgreSQL) or
    one executemany (SQLite).

    `auto_now`/`auto_now_add` fields are filled in as `save()` would; nothing is read back.
    """
    if not objs:
        return
    db = database()
    model = type(objs[0])
    meta = model._meta
    _stamped(objs)
    if db.vendor == "postgresql":
        fields = list(meta.concrete_fields)
        rows = [[getattr(obj, f.attname) for f in fields] for obj in objs]
        postgres.insert(db, meta.db_table, fields, _values(db, fields, rows))
        _saved(objs, db)
        return

    def make(marks: Callable[[int], str]) -> tuple[str, Sequence[Field[Any, Any]]]:
        fields = list(meta.concrete_fields)
        columns = ", ".join(column_name(f, db) for f in fields)
        table = db.ops.quote_name(meta.db_table)
        return f"INSERT INTO {table} ({columns}) VALUES ({marks(len(fields))})", fields

    statement = _statement(("insert", model), db, make)
    _write(db, statement.sql, [statement.values(obj, db) for obj in objs])
    _saved(objs, db)


_batch_sizes: dict[tuple[type[Model], str], int] = {}


def _batch_size(model: type[Model], db: BaseDatabaseWrapper) -> int:
    """Rows of `model` (all but its key) one SQLite statement takes: its limit of parameters
    over the columns, worked out by Django once per model, not field by field per batch."""
    key = (model, db.alias)
    found = _batch_sizes.get(key)
    if found is None:
        pk = _pk(model._meta)
        fields = [f for f in model._meta.concrete_fields if f is not pk]
        # The objects count only on a backend without a limit (SQLite has one).
        found = _batch_sizes[key] = max(1, db.ops.bulk_batch_size(fields, [None] * 1000))
    return found


def insert_returning_pks(objs: Sequence[Model]) -> None:
    """`INSERT` objects whose primary key the database assigns, and set each one's pk.

    One statement returning the keys in the order the rows were given (PostgreSQL: `unnest`,
    as `bulk_create` does; SQLite >= 3.35: a multi-row `VALUES ... RETURNING` per chunk).
    """
    if not objs:
        return
    db = database()
    model = type(objs[0])
    meta = model._meta
    pk = _pk(meta)
    fields = [f for f in meta.concrete_fields if f is not pk]
    _stamped(objs)
    if db.vendor == "postgresql":
        rows = [[getattr(obj, f.attname) for f in fields] for obj in objs]
        keys = postgres.insert(db, meta.db_table, fields, _values(db, fields, rows), returning=pk)
        for obj, key in zip(objs, keys, strict=True):
            setattr(obj, pk.attname, key)
        _saved(objs, db)
        return
    size = _batch_size(model, db)
    for start in range(0, len(objs), size):
        chunk = objs[start : start + size]

        def make(
            marks: Callable[[int], str], rows: int = len(chunk)
        ) -> tuple[str, Sequence[Field[Any, Any]]]:
            columns = ", ".join(column_name(f, db) for f in fields)
            table = db.ops.quote_name(meta.db_table)
            values = ", ".join([f"({marks(len(fields))})"] * rows)
            return (
                f"INSERT INTO {table} ({columns}) VALUES {values} RETURNING {column_name(pk, db)}",
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
    db = database()
    meta = model._meta
    if db.vendor == "postgresql":
        columns = fields_of(meta, fields)
        postgres.insert(db, meta.db_table, columns, _values(db, columns, rows))
        return

    def make(marks: Callable[[int], str]) -> tuple[str, Sequence[Field[Any, Any]]]:
        columns = fields_of(meta, fields)
        names = ", ".join(column_name(c, db) for c in columns)
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
    db = database()
    meta = model._meta
    if db.vendor == "postgresql":
        columns, pk = fields_of(meta, fields), _pk(meta)
        values = _values(db, [*columns, pk], [(*values, key) for key, values in rows])
        postgres.update(db, meta.db_table, columns, pk, values)
        return

    def make(marks: Callable[[int], str]) -> tuple[str, Sequence[Field[Any, Any]]]:
        columns = fields_of(meta, fields)
        pk = _pk(meta)
        assignments = ", ".join(f"{column_name(c, db)} = {marks(1)}" for c in columns)
        table = db.ops.quote_name(meta.db_table)
        return (
            f"UPDATE {table} SET {assignments} WHERE {column_name(pk, db)} = {marks(1)}",
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
    columns = fields_of(meta, fields)
    update_values(
        type(objs[0]),
        fields,
        [(obj.pk, [getattr(obj, c.attname) for c in columns]) for obj in objs],
    )
