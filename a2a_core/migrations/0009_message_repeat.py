"""A message whose earlier copy's task moved on is new work, recorded as the next `repeat` of
it: the retry constraint takes `repeat` in (see `selectors.message_retries`)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("a2a_core", "0008_task_inflight_index"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="message",
            name="message_idempotent_per_sender",
        ),
        migrations.AddField(
            model_name="message",
            name="repeat",
            field=models.PositiveSmallIntegerField(default=0),
        ),
        migrations.AddConstraint(
            model_name="message",
            constraint=models.UniqueConstraint(
                condition=models.Q(("direction", "request"), ("sender__isnull", False))
                & ~models.Q(("decision", "reject")),
                fields=("sender", "message_id", "digest", "repeat"),
                name="message_idempotent_per_sender",
            ),
        ),
    ]
