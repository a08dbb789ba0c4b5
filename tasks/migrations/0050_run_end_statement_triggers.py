"""The two triggers that a run's end sets off, once per statement instead of once per ended run:
`runs_ended_complete_tasks` completes the tasks with nothing left to plan or run
(tasks/sql/complete.sql) and `runs_ended_resolve_steps` resolves the workflow runs of the step runs
that ended (tasks/sql/workflows.sql). Each reads the statement's old and new rows (transition
tables) and finds the runs that ended there. Per ended run, the two row triggers cost a function
call and a query each, about a tenth of the worker's cycle statement (bench/NOTEBOOK.md, "The
run-end triggers once per statement"). The SQL below is this migration's own, frozen.
"""

from django.db import migrations

COMPLETE_TASKS_FUNCTION = """
CREATE OR REPLACE FUNCTION tasks_runs_complete_tasks() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    v_tasks uuid[];
BEGIN
    SELECT array_agg(DISTINCT n.task_id ORDER BY n.task_id) INTO v_tasks
      FROM runs_after n
     WHERE n.status IN ('succeeded', 'failed', 'cancelled', 'skipped')
       AND n.id NOT IN (SELECT o.id FROM runs_before o
                         WHERE o.status IN ('succeeded', 'failed', 'cancelled', 'skipped'));
    IF v_tasks IS NULL THEN
        RETURN NULL;
    END IF;
    PERFORM 1 FROM tasks_task
      WHERE id = ANY(v_tasks) AND status = 'active' AND next_unplanned_at IS NULL
      ORDER BY id FOR UPDATE;
    IF FOUND THEN
        UPDATE tasks_task t
           SET status = CASE WHEN (SELECT r.status FROM tasks_run r
                                    WHERE r.task_id = t.id
                                      AND (r.attempt > 0 OR r.finished_at IS NOT NULL)
                                    ORDER BY r.scheduled_at DESC LIMIT 1) = 'failed'
                             THEN 'failed' ELSE 'completed' END,
               updated_at = clock_timestamp()
         WHERE t.id = ANY(v_tasks) AND t.status = 'active' AND t.next_unplanned_at IS NULL
           AND NOT EXISTS (SELECT 1 FROM tasks_run r WHERE r.task_id = t.id
                              AND r.status IN ('scheduled', 'running', 'waiting_for_resource'));
    END IF;
    RETURN NULL;
END
$$
"""

COMPLETE_TASKS_TRIGGER = """
DROP TRIGGER IF EXISTS runs_ended_complete_tasks ON tasks_run;
CREATE TRIGGER runs_ended_complete_tasks AFTER UPDATE ON tasks_run
    REFERENCING OLD TABLE AS runs_before NEW TABLE AS runs_after
    FOR EACH STATEMENT EXECUTE FUNCTION tasks_runs_complete_tasks();
"""

RESOLVE_STEPS_FUNCTION = """
CREATE OR REPLACE FUNCTION tasks_runs_resolve_steps() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    v_step record;
BEGIN
    FOR v_step IN
        SELECT s.workflow_run_id, s.step_id FROM tasks_workflowstep s
         WHERE s.run_id = ANY(ARRAY(
                   SELECT n.id FROM runs_after n
                    WHERE n.status IN ('succeeded', 'failed', 'cancelled', 'skipped')
                      AND n.id NOT IN (SELECT o.id FROM runs_before o
                                        WHERE o.status IN ('succeeded', 'failed', 'cancelled', 'skipped'))))
         ORDER BY s.workflow_run_id, s.step_id
    LOOP
        PERFORM tasks_workflow_resolve(v_step.workflow_run_id, v_step.step_id);
    END LOOP;
    RETURN NULL;
END
$$
"""

RESOLVE_STEPS_TRIGGER = """
DROP TRIGGER IF EXISTS runs_ended_resolve_steps ON tasks_run;
CREATE TRIGGER runs_ended_resolve_steps AFTER UPDATE ON tasks_run
    REFERENCING OLD TABLE AS runs_before NEW TABLE AS runs_after
    FOR EACH STATEMENT EXECUTE FUNCTION tasks_runs_resolve_steps();
"""

DROP_ROW_TRIGGERS = """
DROP TRIGGER IF EXISTS run_ended_completes_task ON tasks_run;
DROP TRIGGER IF EXISTS run_ended_resolves_workflow ON tasks_run;
DROP FUNCTION IF EXISTS tasks_run_complete_task();
DROP FUNCTION IF EXISTS tasks_run_step_ended();
"""

DROP_STATEMENT_TRIGGERS = """
DROP TRIGGER IF EXISTS runs_ended_complete_tasks ON tasks_run;
DROP TRIGGER IF EXISTS runs_ended_resolve_steps ON tasks_run;
DROP FUNCTION IF EXISTS tasks_runs_complete_tasks();
DROP FUNCTION IF EXISTS tasks_runs_resolve_steps();
"""

# The row triggers as migrations 0019 and 0031 made them (the reverse).
ROW_COMPLETE_FUNCTION = """
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

ROW_COMPLETE_TRIGGER = """
DROP TRIGGER IF EXISTS run_ended_completes_task ON tasks_run;
CREATE TRIGGER run_ended_completes_task AFTER UPDATE OF status ON tasks_run FOR EACH ROW
    WHEN (NEW.status IN ('succeeded', 'failed', 'cancelled', 'skipped')
          AND OLD.status NOT IN ('succeeded', 'failed', 'cancelled', 'skipped'))
    EXECUTE FUNCTION tasks_run_complete_task();
"""

ROW_STEP_FUNCTION = """
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

ROW_STEP_TRIGGER = """
DROP TRIGGER IF EXISTS run_ended_resolves_workflow ON tasks_run;
CREATE TRIGGER run_ended_resolves_workflow AFTER UPDATE OF status ON tasks_run FOR EACH ROW
    WHEN (NEW.status IN ('succeeded', 'failed', 'cancelled', 'skipped')
          AND OLD.status NOT IN ('succeeded', 'failed', 'cancelled', 'skipped'))
    EXECUTE FUNCTION tasks_run_step_ended();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("tasks", "0049_task_partial_indexes"),
    ]

    # One transaction: no statement ends a run between the two kinds of trigger.
    operations = [
        migrations.RunSQL(
            [
                COMPLETE_TASKS_FUNCTION,
                RESOLVE_STEPS_FUNCTION,
                DROP_ROW_TRIGGERS,
                COMPLETE_TASKS_TRIGGER,
                RESOLVE_STEPS_TRIGGER,
            ],
            reverse_sql=[
                ROW_COMPLETE_FUNCTION,
                ROW_STEP_FUNCTION,
                DROP_STATEMENT_TRIGGERS,
                ROW_COMPLETE_TRIGGER,
                ROW_STEP_TRIGGER,
            ],
        ),
    ]
