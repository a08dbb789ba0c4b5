# A notification may be about a workflow alone (`workflow_overdue`: no workflow run of it
# succeeded within its `expect.success_within`), inserted by a trigger on the workflow's row when
# the reviewer moves its `overdue_from` to a new lapse. The SQL below is this migration's own,
# frozen: notifications/sql/functions.sql holds the current definitions.

import django.contrib.postgres.fields
import django.db.models.deletion
from django.db import migrations, models

WORKFLOW_OVERDUE_FUNCTION = """
-- Queued by the reviewer's `workflow_overdue` pass (tasks/sql/expect.sql) when it moves the
-- workflow's `overdue_from` to a lapse not alerted yet (the row is locked there, so this
-- happens once per lapse). Subscribers are those of a workflow run's end (above) for the event
-- `workflow_overdue`. The row names the workflow alone; `attempt` 0, `retry_until` NULL.
CREATE OR REPLACE FUNCTION notifications_workflow_overdue() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_notify jsonb := CASE WHEN jsonb_typeof(NEW.notify) = 'array' THEN NEW.notify
                           ELSE '[]'::jsonb END;
    inserted integer;
    queued_at timestamptz := clock_timestamp();
BEGIN
    WITH wanted AS (
        SELECT lower(s.value ->> 'channel') AS channel
          FROM jsonb_array_elements(v_notify) AS s(value)
         WHERE jsonb_typeof(s.value) = 'object' AND s.value -> 'events' ? 'workflow_overdue'
        UNION
        SELECT c.id::text FROM notifications_channel c
         WHERE c.owner_id = NEW.owner_id AND c.all_tasks_events <> '{}'
           AND 'workflow_overdue' = ANY(c.all_tasks_events)
    ), ins AS (
        INSERT INTO notifications_notification
               (id, channel_id, workflow_id, attempt, event, status, attempts,
                next_attempt_at, last_error, created_at)
        SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) PLACING
                   substring(int8send((extract(epoch FROM clock_timestamp()) * 1000)::bigint)
                   FROM 3) FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid,
               c.id, NEW.id, 0, 'workflow_overdue', 'pending', 0, queued_at, '', queued_at
          FROM wanted w JOIN notifications_channel c
            ON c.owner_id = NEW.owner_id AND c.id::text = w.channel
        RETURNING 1
    )
    SELECT count(*) INTO inserted FROM ins;
    IF inserted > 0 THEN
        PERFORM pg_notify('scheduler_notification', '');
    END IF;
    RETURN NULL;
END
$$;
"""

WORKFLOW_OVERDUE_TRIGGER = """
DROP TRIGGER IF EXISTS workflow_overdue_notifies ON tasks_workflow;
CREATE TRIGGER workflow_overdue_notifies AFTER UPDATE OF overdue_from ON tasks_workflow
    FOR EACH ROW
    WHEN (NEW.health = 'overdue' AND NEW.overdue_from IS DISTINCT FROM OLD.overdue_from)
    EXECUTE FUNCTION notifications_workflow_overdue();
"""

DROP = """
DROP TRIGGER IF EXISTS workflow_overdue_notifies ON tasks_workflow;
DROP FUNCTION IF EXISTS notifications_workflow_overdue();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("notifications", "0009_enqueue_team_channels"),
        ("tasks", "0043_workflow_expect"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="notification",
            name="notification_event_valid",
        ),
        migrations.RemoveConstraint(
            model_name="notification",
            name="notification_task_or_workflow_run",
        ),
        migrations.AddField(
            model_name="notification",
            name="workflow",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="tasks.workflow",
            ),
        ),
        migrations.AlterField(
            model_name="channel",
            name="all_tasks_events",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.CharField(
                    choices=[
                        ("succeeded", "succeeded"),
                        ("failed", "failed"),
                        ("retries_exhausted", "retries_exhausted"),
                        ("missed", "missed"),
                        ("stuck", "stuck"),
                        ("zombie", "zombie"),
                        ("late", "late"),
                        ("too_fast", "too_fast"),
                        ("too_slow", "too_slow"),
                        ("failing", "failing"),
                        ("overdue", "overdue"),
                        ("recovered", "recovered"),
                        ("skipped", "skipped"),
                        ("workflow_succeeded", "workflow_succeeded"),
                        ("workflow_failed", "workflow_failed"),
                        ("workflow_overdue", "workflow_overdue"),
                    ],
                    max_length=32,
                ),
                blank=True,
                default=list,
                size=None,
            ),
        ),
        migrations.AlterField(
            model_name="notification",
            name="event",
            field=models.CharField(
                choices=[
                    ("succeeded", "Succeeded"),
                    ("failed", "Failed"),
                    ("retries_exhausted", "Retries Exhausted"),
                    ("missed", "Missed"),
                    ("stuck", "Stuck"),
                    ("zombie", "Zombie"),
                    ("late", "Late"),
                    ("too_fast", "Too Fast"),
                    ("too_slow", "Too Slow"),
                    ("failing", "Failing"),
                    ("overdue", "Overdue"),
                    ("recovered", "Recovered"),
                    ("skipped", "Skipped"),
                    ("workflow_succeeded", "Workflow Succeeded"),
                    ("workflow_failed", "Workflow Failed"),
                    ("workflow_overdue", "Workflow Overdue"),
                ],
                max_length=24,
            ),
        ),
        migrations.AddConstraint(
            model_name="notification",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    (
                        "event__in",
                        (
                            "succeeded",
                            "failed",
                            "retries_exhausted",
                            "missed",
                            "stuck",
                            "zombie",
                            "late",
                            "too_fast",
                            "too_slow",
                            "failing",
                            "overdue",
                            "recovered",
                            "skipped",
                            "workflow_succeeded",
                            "workflow_failed",
                            "workflow_overdue",
                        ),
                    )
                ),
                name="notification_event_valid",
            ),
        ),
        migrations.AddConstraint(
            model_name="notification",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(
                        ("task__isnull", False),
                        ("workflow__isnull", True),
                        ("workflow_run__isnull", True),
                    ),
                    models.Q(
                        ("run__isnull", True),
                        ("task__isnull", True),
                        ("workflow_run__isnull", False),
                        ("workflow__isnull", True),
                    ),
                    models.Q(
                        ("run__isnull", True),
                        ("task__isnull", True),
                        ("workflow_run__isnull", True),
                        ("workflow__isnull", False),
                    ),
                    _connector="OR",
                ),
                name="notification_task_workflow_run_or_workflow",
            ),
        ),
        migrations.RunSQL([WORKFLOW_OVERDUE_FUNCTION, WORKFLOW_OVERDUE_TRIGGER], reverse_sql=DROP),
    ]
