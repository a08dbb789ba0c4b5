from django.conf import settings
from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    # tasks_run holds years of history: build the reviewer's index of runs with requests without
    # blocking writes (CONCURRENTLY), which PostgreSQL only allows outside a transaction.
    atomic = False

    dependencies = [
        ("tasks", "0015_run_requests"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="run",
            index=models.Index(
                condition=models.Q(
                    ("status__in", ("scheduled", "waiting_for_resource")),
                    models.Q(("cpu_millis__gt", 0), ("memory_bytes__gt", 0), _connector="OR"),
                ),
                fields=["execute_at"],
                name="run_requests_idx",
            ),
        ),
    ]
