# A finished run's summary kept on the run: the column, the function that writes it and the
# triggers that call it. Adding a NULL column rewrites nothing; runs that finished before this
# migration keep no summary and are formatted as they are read (as before).
#
# The SQL below is this migration's own, frozen: tasks/sql/run_summary.sql holds the current
# definitions, and a change there comes with a new migration that applies the new text.

from django.db import migrations, models

SUMMARY_FUNCTION = """
CREATE OR REPLACE FUNCTION tasks_run_summary(
    p_id uuid, p_scheduled_at timestamptz, p_status text, p_attempt integer,
    p_started_at timestamptz, p_finished_at timestamptz
) RETURNS text LANGUAGE sql STABLE PARALLEL SAFE AS $$
SELECT '{"id":"' || p_id
    || '","scheduled_at":"' || replace(to_char(p_scheduled_at AT TIME ZONE 'UTC',
                                               'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), '.000000Z', 'Z')
    || '","status":"' || p_status || '","attempt":' || p_attempt
    || ',"started_at":' || coalesce('"' || replace(to_char(p_started_at AT TIME ZONE 'UTC',
                                   'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), '.000000Z', 'Z') || '"', 'null')
    || ',"finished_at":' || coalesce('"' || replace(to_char(p_finished_at AT TIME ZONE 'UTC',
                                    'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), '.000000Z', 'Z') || '"', 'null')
    || '}'
$$
"""

KEEP_SUMMARY_FUNCTION = """
CREATE OR REPLACE FUNCTION tasks_run_keep_summary() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.summary := CASE WHEN NEW.status IN ('succeeded', 'failed', 'cancelled', 'skipped')
                        THEN tasks_run_summary(NEW.id, NEW.scheduled_at, NEW.status, NEW.attempt,
                                               NEW.started_at, NEW.finished_at) END;
    RETURN NEW;
END
$$
"""

SUMMARY_TRIGGERS = """
DROP TRIGGER IF EXISTS run_summary_on_insert ON tasks_run;
DROP TRIGGER IF EXISTS run_summary_on_update ON tasks_run;
CREATE TRIGGER run_summary_on_insert BEFORE INSERT ON tasks_run FOR EACH ROW
    WHEN (NEW.status IN ('succeeded', 'failed', 'cancelled', 'skipped') OR NEW.summary IS NOT NULL)
    EXECUTE FUNCTION tasks_run_keep_summary();
CREATE TRIGGER run_summary_on_update
    BEFORE UPDATE OF status, attempt, scheduled_at, started_at, finished_at, summary ON tasks_run
    FOR EACH ROW
    WHEN ((NEW.status IN ('succeeded', 'failed', 'cancelled', 'skipped')
           OR NEW.summary IS NOT NULL)
          AND (NEW.status, NEW.attempt, NEW.scheduled_at, NEW.started_at, NEW.finished_at,
               NEW.summary)
              IS DISTINCT FROM (OLD.status, OLD.attempt, OLD.scheduled_at, OLD.started_at,
                                OLD.finished_at, OLD.summary))
    EXECUTE FUNCTION tasks_run_keep_summary();
ALTER TABLE tasks_run ENABLE ALWAYS TRIGGER run_summary_on_insert;
ALTER TABLE tasks_run ENABLE ALWAYS TRIGGER run_summary_on_update;
"""

DROP = """
DROP TRIGGER IF EXISTS run_summary_on_insert ON tasks_run;
DROP TRIGGER IF EXISTS run_summary_on_update ON tasks_run;
DROP FUNCTION IF EXISTS tasks_run_keep_summary();
DROP FUNCTION IF EXISTS tasks_run_summary(uuid, timestamptz, text, integer, timestamptz,
                                          timestamptz);
"""


class Migration(migrations.Migration):
    dependencies = [
        ("tasks", "0013_zombie_runs"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="summary",
            field=models.TextField(blank=True, editable=False, null=True),
        ),
        migrations.RunSQL(SUMMARY_FUNCTION, reverse_sql=migrations.RunSQL.noop),
        migrations.RunSQL(KEEP_SUMMARY_FUNCTION, reverse_sql=migrations.RunSQL.noop),
        migrations.RunSQL(SUMMARY_TRIGGERS, reverse_sql=DROP),
    ]
