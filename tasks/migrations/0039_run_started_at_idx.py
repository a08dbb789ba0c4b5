"""Runs by when they started (`run_started_at_idx`), for the console pages that ask for them:

- the run list filtered by `started_at__gte`/`__lt` (every bar of the dashboard's starts and
  lateness charts links to one): without it, a range with fewer than a page of runs read the
  whole table newest first, 0.5 to 1.3 s with 1,000,000 runs (`python -m bench admin`);
- a user's dashboard, whose starts per bucket are read by start time;
- the timeline, which finds the runs running in a range by their start.

Partial (`started_at IS NOT NULL`): a run planned ahead has no entry until a worker claims it, so
planning writes nothing more, and a skipped run never has one. Every bound on `started_at` implies
the condition, so each of those queries can use it. Built CONCURRENTLY (tasks_run holds years of
history), which PostgreSQL allows only outside a transaction.
"""

from django.db import migrations, models

CREATE = """
CREATE INDEX CONCURRENTLY run_started_at_idx ON tasks_run (started_at)
WHERE started_at IS NOT NULL
"""
DROP = "DROP INDEX CONCURRENTLY IF EXISTS run_started_at_idx"


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("tasks", "0038_limit_keys_per_team")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(CREATE, reverse_sql=DROP)],
            state_operations=[
                migrations.AddIndex(
                    model_name="run",
                    index=models.Index(
                        condition=models.Q(("started_at__isnull", False)),
                        fields=["started_at"],
                        name="run_started_at_idx",
                    ),
                ),
            ],
        ),
    ]
