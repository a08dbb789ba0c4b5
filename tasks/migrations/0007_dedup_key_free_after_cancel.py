"""A cancelled (deleted) task no longer holds its dedup_key: the unique index skips it."""

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tasks", "0006_drop_run_claimable_time_idx"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="task",
            name="task_unique_owner_dedup_key",
        ),
        migrations.AddConstraint(
            model_name="task",
            constraint=models.UniqueConstraint(
                condition=models.Q(
                    ("dedup_key__isnull", False), models.Q(("status", "cancelled"), _negated=True)
                ),
                fields=("owner", "dedup_key"),
                name="task_unique_owner_dedup_key",
            ),
        ),
    ]
