# Why a run waits, and why a run was skipped, as columns: `wait_kind` (one of the kinds of
# tasks/admission/) and `skip_kind` (tasks.events.SKIP_KINDS), each with a CHECK listing them, so
# that statements and code choose by kind instead of reading the words of wait_reason or error.
# Runs waiting or skipped when this applies get their kind from their words, once, here; the
# lists in the CHECKs and the words below are this migration's own, frozen: a new kind comes
# with a new migration.

from django.db import migrations, models

WAIT_KINDS = """
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

# Only terminal runs are skipped: the scan is of the history, once; runs of other statuses keep
# "" (the column's default, written without a rewrite).
SKIP_KINDS = """
UPDATE tasks_run
   SET skip_kind = CASE
         WHEN starts_with(error, 'missed:') THEN 'misfire'
         WHEN starts_with(error, 'skipped: the previous run') THEN 'overlap'
         WHEN starts_with(error, 'paused:') THEN 'pause'
         WHEN starts_with(error, 'skipped on request') THEN 'request'
         WHEN starts_with(error, 'excluded:') THEN 'exclusion'
         ELSE '' END
 WHERE status = 'skipped'
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
        migrations.AddField(
            model_name="run",
            name="skip_kind",
            field=models.CharField(blank=True, db_default="", default="", max_length=16),
        ),
        migrations.RunSQL(WAIT_KINDS, reverse_sql=migrations.RunSQL.noop),
        migrations.RunSQL(SKIP_KINDS, reverse_sql=migrations.RunSQL.noop),
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
        migrations.AddConstraint(
            model_name="run",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("skip_kind__in", ("", "misfire", "overlap", "pause", "request", "exclusion"))
                ),
                name="run_skip_kind_valid",
            ),
        ),
    ]
