# The planner's cursor renamed (the API's next_run_at is the next fire time), and `failed` tasks.

from django.conf import settings
from django.db import migrations, models

# Tasks that ended before `failed` existed: `failed` when their last run (the latest begun run)
# failed, as tasks/sql/complete.sql now ends them. Frozen here: later changes to that file do
# not change what this migration did.
MARK_FAILED = """
UPDATE tasks_task t SET status = 'failed'
 WHERE t.status = 'completed'
   AND (SELECT r.status FROM tasks_run r
         WHERE r.task_id = t.id AND (r.attempt > 0 OR r.finished_at IS NOT NULL)
         ORDER BY r.scheduled_at DESC LIMIT 1) = 'failed'
"""
UNMARK_FAILED = "UPDATE tasks_task SET status = 'completed' WHERE status = 'failed'"


class Migration(migrations.Migration):
    dependencies = [
        ("tasks", "0016_run_requests_idx"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="task",
            name="task_status_valid",
        ),
        migrations.RemoveIndex(
            model_name="task",
            name="task_due_idx",
        ),
        migrations.RenameField(
            model_name="task",
            old_name="next_run_at",
            new_name="next_unplanned_at",
        ),
        migrations.AlterField(
            model_name="task",
            name="status",
            field=models.CharField(
                choices=[
                    ("active", "Active"),
                    ("paused", "Paused"),
                    ("completed", "Completed"),
                    ("failed", "Failed"),
                    ("cancelled", "Cancelled"),
                ],
                default="active",
                max_length=16,
            ),
        ),
        migrations.AddIndex(
            model_name="task",
            index=models.Index(
                condition=models.Q(("next_unplanned_at__isnull", False), ("status", "active")),
                fields=["next_unplanned_at"],
                name="task_due_idx",
            ),
        ),
        migrations.AddConstraint(
            model_name="task",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("status__in", ["active", "paused", "completed", "failed", "cancelled"])
                ),
                name="task_status_valid",
            ),
        ),
        migrations.RunSQL(MARK_FAILED, UNMARK_FAILED),
    ]
