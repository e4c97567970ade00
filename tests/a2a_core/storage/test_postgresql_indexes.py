"""PostgreSQL: the hub's tables carry no `LIKE 'prefix%'` (`*_pattern_ops`) indexes, which no
query of the hub uses and every insert had to keep up; migration 0007 drops those a schema made
before it has."""

from __future__ import annotations

import importlib

import pytest
from django.db import connection, models
from django.db.backends.postgresql.schema import DatabaseSchemaEditor as DjangoSchemaEditor

from a2a_core.models import Message, Task

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's indexes"),
]


def pattern_indexes() -> list[str]:
    from a2a_core.storage.postgresql.base import pattern_indexes

    return pattern_indexes(connection)


def indexed_columns(table: str) -> set[str]:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, table)
    return {
        c["columns"][0]
        for c in constraints.values()
        if (c["index"] or c["primary_key"]) and len(c["columns"]) == 1
    }


def test_a_fresh_schema_has_its_indexes_but_none_for_like():
    assert pattern_indexes() == []
    # The plain indexes of the same columns are there.
    assert {"id", "context_id", "parent_id", "trace_id"} <= indexed_columns("a2a_core_task")
    assert {"context_id", "correlation_id"} <= indexed_columns("a2a_core_message")


def test_an_indexed_text_column_added_later_gets_its_index_alone():
    field = models.CharField(max_length=40, db_index=True, null=True)
    field.set_attributes_from_name("probe")
    with connection.schema_editor() as editor:
        editor.add_field(Task, field)

    assert "probe" in indexed_columns("a2a_core_task")
    assert pattern_indexes() == []


def test_the_migration_drops_the_pattern_indexes_an_older_schema_has():
    # What Django's own backend made for these columns before the hub's backend.
    with DjangoSchemaEditor(connection) as older:
        for model, name in ((Task, "context_id"), (Task, "id"), (Message, "correlation_id")):
            older.execute(older._create_like_index_sql(model, model._meta.get_field(name)))
    assert len(pattern_indexes()) == 3

    migration = importlib.import_module("a2a_core.migrations.0007_no_pattern_indexes")
    with connection.schema_editor() as editor:
        migration.forwards(None, editor)

    assert pattern_indexes() == []
    assert {"id", "context_id"} <= indexed_columns("a2a_core_task")
