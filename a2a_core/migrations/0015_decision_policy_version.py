"""Which policy version decided each message (shown as "policy vN by <author>")."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('a2a_core', '0014_content_rules'),
    ]

    operations = [
        migrations.AddField(
            model_name='message',
            name='decision_policy_version',
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
    ]
