"""Tasks that are not active, by status (`task_not_active_idx`), for the console's task list
filtered by status: paused, completed, failed or cancelled tasks are a few in 100,000, and the
list found them by reading the whole tasks table (its count, up to 1,000 rows, never reached
its cap), 150 to 480 ms (`python -m bench admin`, "tasks: status=paused").

Partial (`status <> 'active'`): active tasks, the ones the scheduler updates as it plans, have
no entry, so planning writes nothing more; a task gets one when paused or ended. Built
CONCURRENTLY, outside a transaction.
"""

from django.db import migrations, models

CREATE = """
CREATE INDEX CONCURRENTLY task_not_active_idx ON tasks_task (status)
WHERE NOT (status = 'active')
"""
DROP = "DROP INDEX CONCURRENTLY IF EXISTS task_not_active_idx"


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("tasks", "0040_audit_object_name_idx")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(CREATE, reverse_sql=DROP)],
            state_operations=[
                migrations.AddIndex(
                    model_name="task",
                    index=models.Index(
                        condition=models.Q(("status", "active"), _negated=True),
                        fields=["status"],
                        name="task_not_active_idx",
                    ),
                ),
            ],
        ),
    ]
