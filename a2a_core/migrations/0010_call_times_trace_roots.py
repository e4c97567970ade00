"""When each call passed the points of its way through the hub (the trace's split of a span's
time), and an index of root tasks for the trace list."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("a2a_core", "0009_message_repeat"),
    ]

    operations = [
        migrations.AddField(
            model_name="message",
            name="call_times",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name="task",
            index=models.Index(
                condition=models.Q(("depth", 0)),
                fields=["-created_at", "-id"],
                name="task_roots",
            ),
        ),
    ]
