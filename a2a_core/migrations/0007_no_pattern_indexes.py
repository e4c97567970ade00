"""PostgreSQL: drop the `varchar_pattern_ops` indexes Django made beside the hub's indexed
text columns; no query uses them, every insert kept them (see a2a_core/storage/postgresql)."""

from typing import Any

from django.db import migrations


def forwards(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        from a2a_core.storage.postgresql.base import drop_pattern_indexes

        drop_pattern_indexes(schema_editor)


class Migration(migrations.Migration):
    dependencies = [("a2a_core", "0006_escalation_inbox")]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop, elidable=True)]
