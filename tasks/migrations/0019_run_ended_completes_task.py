# A task completes when its last run ends by an UPDATE, checked by a trigger once the whole
# statement has run (tasks/sql/complete.sql explains why the statements' own checks missed one
# case). The SQL below is this migration's own, frozen: that file holds the current definitions,
# and a change there comes with a new migration that applies the new text.

from django.db import migrations

COMPLETE_TASK_FUNCTION = """
CREATE OR REPLACE FUNCTION tasks_run_complete_task() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM tasks_task
      WHERE id = NEW.task_id AND status = 'active' AND next_unplanned_at IS NULL FOR UPDATE;
    IF FOUND THEN
        UPDATE tasks_task t
           SET status = CASE WHEN (SELECT r.status FROM tasks_run r
                                    WHERE r.task_id = t.id
                                      AND (r.attempt > 0 OR r.finished_at IS NOT NULL)
                                    ORDER BY r.scheduled_at DESC LIMIT 1) = 'failed'
                             THEN 'failed' ELSE 'completed' END,
               updated_at = clock_timestamp()
         WHERE t.id = NEW.task_id AND t.status = 'active' AND t.next_unplanned_at IS NULL
           AND NOT EXISTS (SELECT 1 FROM tasks_run r WHERE r.task_id = t.id
                              AND r.status IN ('scheduled', 'running', 'waiting_for_resource'));
    END IF;
    RETURN NULL;
END
$$
"""

COMPLETE_TASK_TRIGGER = """
DROP TRIGGER IF EXISTS run_ended_completes_task ON tasks_run;
CREATE TRIGGER run_ended_completes_task AFTER UPDATE OF status ON tasks_run FOR EACH ROW
    WHEN (NEW.status IN ('succeeded', 'failed', 'cancelled', 'skipped')
          AND OLD.status NOT IN ('succeeded', 'failed', 'cancelled', 'skipped'))
    EXECUTE FUNCTION tasks_run_complete_task();
"""

DROP = """
DROP TRIGGER IF EXISTS run_ended_completes_task ON tasks_run;
DROP FUNCTION IF EXISTS tasks_run_complete_task();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("tasks", "0018_task_executable_name_and_pause_window"),
    ]

    operations = [
        migrations.RunSQL(COMPLETE_TASK_FUNCTION, reverse_sql=migrations.RunSQL.noop),
        migrations.RunSQL(COMPLETE_TASK_TRIGGER, reverse_sql=DROP),
    ]
