"""Django's PostgreSQL backend, without the indexes for `LIKE 'prefix%'` it adds of its own.

For every indexed `CharField` and `TextField` (and every text primary key) Django's schema
editor makes a second index with `varchar_pattern_ops`, kept for case-sensitive
`startswith` and `contains`. The hub never filters with those: its searches are `icontains`
(`UPPER(...) LIKE`, which no such index serves). Each one is upkeep on every insert, on the
hot tables too (a task's id, context, parent and trace; a message's context and correlation
ids): sixteen indexes in all, and without them the task and message tables' indexes take an
eighth less room per call (2.3 against 2.6 kB after a bench run, bench/README.md). Migration
0007 drops those an older schema has (`drop_pattern_indexes`).
"""

from __future__ import annotations

from typing import Any

from django.db.backends.postgresql import base, schema

from a2a_core.storage.drivers import hung_up

# The hub's own tables (Django's auth and session tables keep theirs).
_TABLES = "a2a\\_core\\_%"


class DatabaseSchemaEditor(schema.DatabaseSchemaEditor):
    def _create_like_index_sql(self, model: Any, field: Any) -> None:
        return None


class DatabaseWrapper(base.DatabaseWrapper):
    SchemaEditorClass = DatabaseSchemaEditor

    def get_new_connection(self, conn_params: Any) -> Any:
        """A connection from the pool, or a new one; never one the server has closed while it
        waited in the pool (`drivers.hung_up`, no round trip): that one goes back, the pool
        drops it, and the next is taken at once. After a restart of PostgreSQL every pooled
        connection is closed; without this, each one failed the request that took it next."""
        connection = super().get_new_connection(conn_params)
        for _ in range(self.pool.max_size if self.pool else 0):
            if not hung_up(connection):
                break
            connection._pool.putconn(connection)
            connection = super().get_new_connection(conn_params)
        return connection


def pattern_indexes(connection: Any) -> list[str]:
    """The names of the `*_pattern_ops` indexes on the hub's tables."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() "
            "AND tablename LIKE %s AND indexdef ~ '(varchar|text)_pattern_ops' "
            "ORDER BY indexname",
            [_TABLES],
        )
        return [name for (name,) in cursor.fetchall()]


def drop_pattern_indexes(schema_editor: Any) -> None:
    """Drop the `*_pattern_ops` indexes of the hub's tables."""
    for name in pattern_indexes(schema_editor.connection):
        schema_editor.execute(f"DROP INDEX IF EXISTS {schema_editor.quote_name(name)}")
