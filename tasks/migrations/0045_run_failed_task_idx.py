"""Failed runs by task (`run_failed_task_idx`), for the console's task list filtered by last run
(`?owner=<id>&last_run=failed`): the filter probed every one of the owner's tasks for its last
run, twice (the page and its count), 250 to 470 ms for an owner of 10,000 tasks (`python -m
bench admin`, "tasks: owner, last run failed"). It now looks for the last run only of tasks with
a failed run, which this index finds with one small index-only probe per task.

Partial (`status = 'failed'`): a run gets its entry when it fails for good, a few in a hundred,
and an update that sets a run's status is never HOT (status is in other indexes), so the entry
costs no extra heap write. Built CONCURRENTLY (tasks_run holds years of history), outside a
transaction.
"""

from django.db import migrations, models

CREATE = """
CREATE INDEX CONCURRENTLY run_failed_task_idx ON tasks_run (task_id)
WHERE status = 'failed'
"""
DROP = "DROP INDEX CONCURRENTLY IF EXISTS run_failed_task_idx"


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("tasks", "0044_task_name_trigram_idx")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(CREATE, reverse_sql=DROP)],
            state_operations=[
                migrations.AddIndex(
                    model_name="run",
                    index=models.Index(
                        condition=models.Q(("status", "failed")),
                        fields=["task"],
                        name="run_failed_task_idx",
                    ),
                ),
            ],
        ),
    ]
