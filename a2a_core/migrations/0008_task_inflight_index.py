"""The calls-in-flight count that every accepting group commit makes reads a partial index
holding only the tasks in flight, not every task of the caller: see
`a2a_core.storage.reads.count_by`."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("a2a_core", "0007_no_pattern_indexes"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="task",
            name="task_caller_state",
        ),
        migrations.AddIndex(
            model_name="task",
            index=models.Index(
                condition=models.Q(("state__in", ["submitted", "working"])),
                fields=["caller"],
                name="task_inflight",
            ),
        ),
    ]
