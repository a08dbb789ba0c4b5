# Workflow schedules: a workflow's `schedule`, `next_run_at` (the first occurrence not started,
# indexed for the scheduler's pass) and `runs_started`; a workflow run's `scheduled_at` (the
# occurrence it started for, unique per workflow: one workflow run per occurrence) and `reason`,
# and `skipped` among its statuses (an occurrence not started: misfire, overlap, exclusion).
# Adding nullable or defaulted columns and an index: safe for the previous release.

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tasks", "0032_teams"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="workflowrun",
            name="workflow_run_status_valid",
        ),
        migrations.AddField(
            model_name="workflow",
            name="next_run_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="workflow",
            name="runs_started",
            field=models.IntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name="workflow",
            name="schedule",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="workflowrun",
            name="reason",
            field=models.TextField(blank=True, db_default="", default=""),
        ),
        migrations.AddField(
            model_name="workflowrun",
            name="scheduled_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="workflowrun",
            name="status",
            field=models.CharField(
                choices=[
                    ("running", "Running"),
                    ("succeeded", "Succeeded"),
                    ("failed", "Failed"),
                    ("cancelled", "Cancelled"),
                    ("skipped", "Skipped"),
                ],
                default="running",
                max_length=16,
            ),
        ),
        migrations.AddIndex(
            model_name="workflow",
            index=models.Index(
                condition=models.Q(("next_run_at__isnull", False)),
                fields=["next_run_at"],
                name="workflow_next_run_idx",
            ),
        ),
        migrations.AddConstraint(
            model_name="workflowrun",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("status__in", ("running", "succeeded", "failed", "cancelled", "skipped"))
                ),
                name="workflow_run_status_valid",
            ),
        ),
        migrations.AddConstraint(
            model_name="workflowrun",
            constraint=models.UniqueConstraint(
                condition=models.Q(("scheduled_at__isnull", False)),
                fields=("workflow", "scheduled_at"),
                name="workflow_run_unique_occurrence",
            ),
        ),
    ]
