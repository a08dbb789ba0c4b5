# Workflows: the Workflow, WorkflowRun and WorkflowStep tables; `upstream` as a kind of wait
# (tasks/admission/upstream.py) and of skip (tasks.events.SKIP_KINDS), the CHECKs rebuilt from
# the lists; and the functions and the trigger that release a step once its upstream steps have
# ended, in the transaction that records the end.
#
# The SQL below is this migration's own, frozen: tasks/sql/workflows.sql holds the current
# definitions, and a change there comes with a new migration that applies the new text.

import django.contrib.postgres.fields
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

import tasks.ids

OUTPUT_FUNCTION = """
CREATE OR REPLACE FUNCTION tasks_workflow_output(p_output text) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_output IS NULL OR p_output = '' THEN
        RETURN 'null'::jsonb;
    END IF;
    RETURN p_output::jsonb;
EXCEPTION WHEN others THEN
    RETURN to_jsonb(p_output);
END
$$
"""

RESOLVE_FUNCTION = """
CREATE OR REPLACE FUNCTION tasks_workflow_resolve(p_workflow_run uuid, p_step text)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_status text;
    v_step record;
    v_task uuid;
    v_downstream text[];
    v_next text[];
    v_ended boolean;
    v_all_succeeded boolean;
    v_any_failed boolean;
    v_outputs jsonb;
    v_upstream text;
    v_done integer := 0;
    v_released boolean := false;
BEGIN
    -- An ended workflow run stays ended: read without a lock first, so that a cancel's own
    -- run updates (tasks/transitions/workflows.py) never wait here on a row lock.
    SELECT status INTO v_status FROM tasks_workflowrun WHERE id = p_workflow_run;
    IF NOT FOUND OR v_status <> 'running' THEN
        RETURN 0;
    END IF;
    SELECT status INTO v_status FROM tasks_workflowrun WHERE id = p_workflow_run FOR UPDATE;
    IF v_status <> 'running' THEN
        RETURN 0;
    END IF;
    IF p_step IS NOT NULL THEN
        UPDATE tasks_workflowstep SET ended = true
         WHERE workflow_run_id = p_workflow_run AND step_id = p_step AND NOT ended
        RETURNING downstream INTO v_downstream;
        IF FOUND THEN
            UPDATE tasks_workflowstep SET waiting = waiting - 1
             WHERE workflow_run_id = p_workflow_run AND step_id = ANY(v_downstream)
               AND NOT ended;
            v_next := v_downstream;
        ELSE
            -- Counted before (its run ended again after a retry of the run alone): nothing
            -- to release, but the workflow run may have been waiting for it to end.
            SELECT downstream INTO v_downstream FROM tasks_workflowstep
             WHERE workflow_run_id = p_workflow_run AND step_id = p_step;
            v_next := ARRAY[]::text[];
        END IF;
    ELSE
        -- A run gone (deleted: its task replanned) has ended, neither succeeded nor failed.
        UPDATE tasks_workflowstep s
           SET ended = NOT EXISTS (
                   SELECT 1 FROM tasks_run r WHERE r.id = s.run_id
                      AND r.status NOT IN ('succeeded', 'failed', 'cancelled', 'skipped'))
         WHERE s.workflow_run_id = p_workflow_run;
        UPDATE tasks_workflowstep s
           SET waiting = (SELECT count(*) FROM tasks_workflowstep us
                           WHERE us.workflow_run_id = s.workflow_run_id
                             AND us.step_id = ANY(s.after) AND NOT us.ended)
         WHERE s.workflow_run_id = p_workflow_run;
    END IF;
    FOR v_step IN
        SELECT s.run_id, s.run_on, s.after
          FROM tasks_workflowstep s JOIN tasks_run r ON r.id = s.run_id
         WHERE s.workflow_run_id = p_workflow_run
           AND (v_next IS NULL OR s.step_id = ANY(v_next))
           AND s.waiting <= 0 AND NOT s.ended
           AND r.status = 'waiting_for_resource' AND r.wait_kind = 'upstream'
         ORDER BY s.step_id
    LOOP
        -- From the runs themselves: a counter that went wrong releases nothing early (the
        -- reviewer's sweep counts again). A gone upstream run has ended, neither succeeded
        -- nor failed, so that nothing waits for it forever.
        SELECT bool_and(u.status IS NULL
                        OR u.status IN ('succeeded', 'failed', 'cancelled', 'skipped')),
               bool_and(u.status IS NOT DISTINCT FROM 'succeeded'),
               bool_or(u.status IS NOT DISTINCT FROM 'failed')
          INTO v_ended, v_all_succeeded, v_any_failed
          FROM tasks_workflowstep us LEFT JOIN tasks_run u ON u.id = us.run_id
         WHERE us.workflow_run_id = p_workflow_run AND us.step_id = ANY(v_step.after);
        IF NOT v_ended THEN
            CONTINUE;
        END IF;
        IF v_step.run_on = 'always'
           OR (v_step.run_on = 'success' AND v_all_succeeded)
           OR (v_step.run_on = 'failure' AND v_any_failed) THEN
            UPDATE tasks_run SET status = 'scheduled', wait_kind = '', wait_reason = '',
                                 execute_at = clock_timestamp()
             WHERE id = v_step.run_id AND status = 'waiting_for_resource'
               AND wait_kind = 'upstream'
            RETURNING task_id INTO v_task;
            IF FOUND THEN
                SELECT jsonb_object_agg(us.step_id, jsonb_build_object(
                           'output', tasks_workflow_output(u.output)))
                  INTO v_outputs
                  FROM tasks_workflowstep us LEFT JOIN tasks_run u ON u.id = us.run_id
                 WHERE us.workflow_run_id = p_workflow_run AND us.step_id = ANY(v_step.after);
                UPDATE tasks_task
                   SET payload = payload || jsonb_build_object(
                           'context', jsonb_build_object('steps', v_outputs))
                 WHERE id = v_task;
                v_released := true;
                v_done := v_done + 1;
            END IF;
        ELSE
            SELECT string_agg(us.step_id || ' ' || coalesce(u.status, 'gone'), ', '
                              ORDER BY us.step_id)
              INTO v_upstream
              FROM tasks_workflowstep us LEFT JOIN tasks_run u ON u.id = us.run_id
             WHERE us.workflow_run_id = p_workflow_run AND us.step_id = ANY(v_step.after);
            UPDATE tasks_run SET status = 'skipped', skip_kind = 'upstream', wait_kind = '',
                                 wait_reason = '', finished_at = clock_timestamp(),
                                 error = 'skipped: runs on ' || v_step.run_on || ', upstream '
                                         || v_upstream
             WHERE id = v_step.run_id AND status = 'waiting_for_resource'
               AND wait_kind = 'upstream';
            IF FOUND THEN
                v_done := v_done + 1;
            END IF;
        END IF;
    END LOOP;
    IF v_released THEN
        PERFORM pg_notify('scheduler_run_due', '');
        -- A step just released has not ended: neither has the workflow run.
        RETURN v_done;
    END IF;
    -- A step after the one that ended has not ended either (it waits for another upstream
    -- step): the workflow run goes on, found without reading every step (a fan-in's child).
    IF p_step IS NOT NULL AND EXISTS (
           SELECT 1 FROM tasks_workflowstep s JOIN tasks_run r ON r.id = s.run_id
            WHERE s.workflow_run_id = p_workflow_run AND s.step_id = ANY(v_downstream)
              AND r.status NOT IN ('succeeded', 'failed', 'cancelled', 'skipped')) THEN
        RETURN v_done;
    END IF;
    -- The status rule: `cancelled` when a step's run was cancelled; `failed` when a step
    -- failed and no `on: failure` step after it ran; else `succeeded`.
    UPDATE tasks_workflowrun w
       SET finished_at = clock_timestamp(),
           status = CASE
               WHEN EXISTS (SELECT 1 FROM tasks_workflowstep s JOIN tasks_run r ON r.id = s.run_id
                             WHERE s.workflow_run_id = w.id AND r.status = 'cancelled')
                    THEN 'cancelled'
               WHEN EXISTS (SELECT 1 FROM tasks_workflowstep f JOIN tasks_run fr ON fr.id = f.run_id
                             WHERE f.workflow_run_id = w.id AND fr.status = 'failed'
                               AND NOT EXISTS (
                                   SELECT 1 FROM tasks_workflowstep h
                                     JOIN tasks_run hr ON hr.id = h.run_id
                                    WHERE h.workflow_run_id = w.id AND h.run_on = 'failure'
                                      AND f.step_id = ANY(h.after) AND hr.status <> 'skipped'))
                    THEN 'failed'
               ELSE 'succeeded' END
     WHERE w.id = p_workflow_run AND w.status = 'running'
       AND NOT EXISTS (SELECT 1 FROM tasks_workflowstep s LEFT JOIN tasks_run r ON r.id = s.run_id
                        WHERE s.workflow_run_id = w.id
                          AND r.status NOT IN ('succeeded', 'failed', 'cancelled', 'skipped'));
    RETURN v_done;
END
$$
"""

STEP_ENDED_FUNCTION = """
CREATE OR REPLACE FUNCTION tasks_run_step_ended() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    v_workflow_run uuid;
    v_step text;
BEGIN
    SELECT workflow_run_id, step_id INTO v_workflow_run, v_step
      FROM tasks_workflowstep WHERE run_id = NEW.id;
    IF FOUND THEN
        PERFORM tasks_workflow_resolve(v_workflow_run, v_step);
    END IF;
    RETURN NULL;
END
$$
"""

STEP_ENDED_TRIGGER = """
DROP TRIGGER IF EXISTS run_ended_resolves_workflow ON tasks_run;
CREATE TRIGGER run_ended_resolves_workflow AFTER UPDATE OF status ON tasks_run FOR EACH ROW
    WHEN (NEW.status IN ('succeeded', 'failed', 'cancelled', 'skipped')
          AND OLD.status NOT IN ('succeeded', 'failed', 'cancelled', 'skipped'))
    EXECUTE FUNCTION tasks_run_step_ended();
"""

DROP = """
DROP TRIGGER IF EXISTS run_ended_resolves_workflow ON tasks_run;
DROP FUNCTION IF EXISTS tasks_run_step_ended();
DROP FUNCTION IF EXISTS tasks_workflow_resolve(uuid, text);
DROP FUNCTION IF EXISTS tasks_workflow_output(text);
"""


class Migration(migrations.Migration):
    dependencies = [
        ("tasks", "0030_audit_entry"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Workflow",
            fields=[
                (
                    "id",
                    models.UUIDField(
                        default=tasks.ids.uuid7, editable=False, primary_key=True, serialize=False
                    ),
                ),
                ("name", models.CharField(max_length=200)),
                ("steps", models.JSONField()),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
            ],
        ),
        migrations.CreateModel(
            name="WorkflowRun",
            fields=[
                (
                    "id",
                    models.UUIDField(
                        default=tasks.ids.uuid7, editable=False, primary_key=True, serialize=False
                    ),
                ),
                (
                    "status",
                    models.CharField(
                        choices=[
                            ("running", "Running"),
                            ("succeeded", "Succeeded"),
                            ("failed", "Failed"),
                            ("cancelled", "Cancelled"),
                        ],
                        default="running",
                        max_length=16,
                    ),
                ),
                ("started_at", models.DateTimeField()),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
            ],
        ),
        migrations.CreateModel(
            name="WorkflowStep",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("step_id", models.CharField(max_length=100)),
                (
                    "after",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.CharField(max_length=100),
                        blank=True,
                        default=list,
                        size=None,
                    ),
                ),
                ("run_on", models.CharField(default="success", max_length=8)),
                (
                    "downstream",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.CharField(max_length=100),
                        blank=True,
                        db_default=[],
                        default=list,
                        size=None,
                    ),
                ),
                ("waiting", models.IntegerField(db_default=0, default=0)),
                ("ended", models.BooleanField(db_default=False, default=False)),
            ],
        ),
        migrations.RemoveConstraint(
            model_name="run",
            name="run_wait_kind_valid",
        ),
        migrations.RemoveConstraint(
            model_name="run",
            name="run_skip_kind_valid",
        ),
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
                            "upstream",
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
                    (
                        "skip_kind__in",
                        ("", "misfire", "overlap", "pause", "request", "exclusion", "upstream"),
                    )
                ),
                name="run_skip_kind_valid",
            ),
        ),
        migrations.AddField(
            model_name="workflow",
            name="owner",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AddField(
            model_name="workflowrun",
            name="owner",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AddField(
            model_name="workflowrun",
            name="workflow",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="runs",
                to="tasks.workflow",
            ),
        ),
        migrations.AddField(
            model_name="workflowstep",
            name="run",
            field=models.OneToOneField(
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="workflow_step",
                to="tasks.run",
            ),
        ),
        migrations.AddField(
            model_name="workflowstep",
            name="workflow_run",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="steps",
                to="tasks.workflowrun",
            ),
        ),
        migrations.AddIndex(
            model_name="workflow",
            index=models.Index(fields=["owner", "-created_at"], name="workflow_owner_created_idx"),
        ),
        migrations.AddIndex(
            model_name="workflowrun",
            index=models.Index(
                fields=["workflow", "-started_at"], name="workflow_run_workflow_idx"
            ),
        ),
        migrations.AddIndex(
            model_name="workflowrun",
            index=models.Index(
                condition=models.Q(("status", "running")),
                fields=["started_at"],
                name="workflow_run_running_idx",
            ),
        ),
        migrations.AddConstraint(
            model_name="workflowrun",
            constraint=models.CheckConstraint(
                condition=models.Q(("status__in", ("running", "succeeded", "failed", "cancelled"))),
                name="workflow_run_status_valid",
            ),
        ),
        migrations.AddConstraint(
            model_name="workflowrun",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(("finished_at__isnull", True), ("status", "running")),
                    models.Q(
                        models.Q(("status", "running"), _negated=True),
                        ("finished_at__isnull", False),
                    ),
                    _connector="OR",
                ),
                name="workflow_run_finished_iff_ended",
            ),
        ),
        migrations.AddConstraint(
            model_name="workflowstep",
            constraint=models.UniqueConstraint(
                fields=("workflow_run", "step_id"), name="workflow_step_unique_run_step"
            ),
        ),
        migrations.AddConstraint(
            model_name="workflowstep",
            constraint=models.CheckConstraint(
                condition=models.Q(("run_on__in", ("success", "failure", "always"))),
                name="workflow_step_run_on_valid",
            ),
        ),
        migrations.RunSQL(
            [OUTPUT_FUNCTION, RESOLVE_FUNCTION, STEP_ENDED_FUNCTION, STEP_ENDED_TRIGGER],
            reverse_sql=DROP,
        ),
    ]
