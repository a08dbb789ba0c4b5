# Why a run waits as a column: `wait_kind`, one of the kinds of tasks/admission/ (the CHECK lists
# them), so that statements choose waiting runs by kind instead of by the words of wait_reason.
# Runs waiting when this applies get their kind from their words, once, here; the list in the
# CHECK and the words below are this migration's own, frozen: a new reason comes with a new
# migration.

from django.db import migrations, models

BACKFILL = """
UPDATE tasks_run
   SET wait_kind = CASE
         WHEN starts_with(wait_reason, 'waiting for free capacity')
              OR starts_with(wait_reason, 'waiting behind a higher-priority run') THEN 'capacity'
         WHEN starts_with(wait_reason, 'no live worker offers ') THEN 'resources'
         WHEN starts_with(wait_reason, 'waiting for concurrency key ') THEN 'concurrency_key'
         WHEN starts_with(wait_reason, 'rate limit ') THEN 'rate_key'
         WHEN starts_with(wait_reason, 'no live worker can run executables') THEN 'sandbox'
         WHEN starts_with(wait_reason, 'not started within the start SLA') THEN 'start_sla'
         ELSE '' END
 WHERE status IN ('scheduled', 'waiting_for_resource') AND wait_reason <> ''
"""


class Migration(migrations.Migration):
    dependencies = [
        ("tasks", "0027_rate_limits"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="wait_kind",
            field=models.CharField(blank=True, db_default="", default="", max_length=24),
        ),
        migrations.RunSQL(BACKFILL, reverse_sql=migrations.RunSQL.noop),
        migrations.AddConstraint(
            model_name="run",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    (
                        "wait_kind__in",
                        (
                            "",
                            "capacity",
                            "resources",
                            "concurrency_key",
                            "rate_key",
                            "sandbox",
                            "start_sla",
                        ),
                    )
                ),
                name="run_wait_kind_valid",
            ),
        ),
    ]
