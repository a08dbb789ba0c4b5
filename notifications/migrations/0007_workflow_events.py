# A notification may be about a workflow run's end (`workflow_succeeded`, `workflow_failed`):
# it names the workflow run and no task or run, and is inserted by a trigger on the workflow
# run's row at its transition from `running`, in the transaction that ends it. Its retry window
# is the deliverer's (retry_until NULL). The SQL below is this migration's own, frozen:
# notifications/sql/functions.sql holds the current definitions.

import django.contrib.postgres.fields
import django.db.models.deletion
from django.db import migrations, models

WORKFLOW_RUN_ENDED_FUNCTION = """
-- Queued by the transition of the workflow run's row from `running` to `succeeded` or `failed`
-- (tasks/sql/workflows.sql ends it in the transaction that records its last step's outcome;
-- the row is locked there, so the transition, and this, happen once per end). Subscribers are
-- the channels the workflow's `notify` names for the event (compared as text, as
-- notifications_enqueue does) and its owner's channels listing the event in
-- `all_tasks_events`, each of the owner's. The row names the workflow run, no run or task;
-- `attempt` is 0 and `retry_until` NULL (the deliverer's window from `created_at`: the
-- database has no setting to read).
CREATE OR REPLACE FUNCTION notifications_workflow_run_ended() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_event text := 'workflow_' || NEW.status;
    v_owner integer;
    v_notify jsonb;
    inserted integer;
    queued_at timestamptz := clock_timestamp();
BEGIN
    SELECT w.owner_id,
           CASE WHEN jsonb_typeof(w.notify) = 'array' THEN w.notify ELSE '[]'::jsonb END
      INTO v_owner, v_notify
      FROM tasks_workflow w WHERE w.id = NEW.workflow_id;
    WITH wanted AS (
        SELECT lower(s.value ->> 'channel') AS channel
          FROM jsonb_array_elements(v_notify) AS s(value)
         WHERE jsonb_typeof(s.value) = 'object' AND s.value -> 'events' ? v_event
        UNION
        SELECT c.id::text FROM notifications_channel c
         WHERE c.owner_id = v_owner AND c.all_tasks_events <> '{}'
           AND v_event = ANY(c.all_tasks_events)
    ), ins AS (
        INSERT INTO notifications_notification
               (id, channel_id, workflow_run_id, attempt, event, status, attempts,
                next_attempt_at, last_error, created_at)
        SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) PLACING
                   substring(int8send((extract(epoch FROM clock_timestamp()) * 1000)::bigint)
                   FROM 3) FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid,
               c.id, NEW.id, 0, v_event, 'pending', 0, queued_at, '', queued_at
          FROM wanted w JOIN notifications_channel c
            ON c.owner_id = v_owner AND c.id::text = w.channel
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

WORKFLOW_RUN_ENDED_TRIGGER = """
DROP TRIGGER IF EXISTS workflow_run_ended_notifies ON tasks_workflowrun;
CREATE TRIGGER workflow_run_ended_notifies AFTER UPDATE OF status ON tasks_workflowrun
    FOR EACH ROW
    WHEN (OLD.status = 'running' AND NEW.status IN ('succeeded', 'failed'))
    EXECUTE FUNCTION notifications_workflow_run_ended();
"""

DROP = """
DROP TRIGGER IF EXISTS workflow_run_ended_notifies ON tasks_workflowrun;
DROP FUNCTION IF EXISTS notifications_workflow_run_ended();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("notifications", "0006_channel_team"),
        ("tasks", "0034_workflow_notify"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="notification",
            name="notification_event_valid",
        ),
        migrations.AddField(
            model_name="notification",
            name="workflow_run",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="tasks.workflowrun",
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
                ],
                max_length=24,
            ),
        ),
        migrations.AlterField(
            model_name="notification",
            name="retry_until",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="notification",
            name="task",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="tasks.task",
            ),
        ),
        migrations.AddIndex(
            model_name="notification",
            index=models.Index(
                condition=models.Q(("workflow_run__isnull", False)),
                fields=["workflow_run"],
                name="notification_workflow_run_idx",
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
                    models.Q(("task__isnull", False), ("workflow_run__isnull", True)),
                    models.Q(
                        ("run__isnull", True),
                        ("task__isnull", True),
                        ("workflow_run__isnull", False),
                    ),
                    _connector="OR",
                ),
                name="notification_task_or_workflow_run",
            ),
        ),
        migrations.RunSQL(
            [WORKFLOW_RUN_ENDED_FUNCTION, WORKFLOW_RUN_ENDED_TRIGGER], reverse_sql=DROP
        ),
    ]
