-- Workflows: releasing a step once its upstream steps have ended, and ending a workflow run
-- once all its steps have (docs/workflows.md states the rules). Done by the database in the
-- transaction that records a step run's final outcome, whoever records it (the worker's cycle,
-- a rescue, a cancel): the claim is unchanged, and a crash between "upstream ended" and
-- "downstream released" cannot happen, since both commit together.

-- A step's output as its downstream steps receive it: the run's output read as JSON, or as a
-- string when it is not JSON (an http body, an output cut at TASKS_OUTPUT_MAX_BYTES); null when
-- empty.
-- name: output_function
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

-- Resolve a workflow run: every held step whose upstream steps have all ended is released
-- (its task's payload gains `context.steps`, the upstream steps' outputs) or, when its `on` is
-- not met, recorded `skipped`; that skip fires the trigger below again, which resolves the
-- steps after it in turn. Then, once every step has ended, the workflow run ends. The workflow
-- run's row is locked first and the steps read after it (statements of their own, so the
-- snapshot includes a sibling step's end committed meanwhile): two steps ending at once are
-- resolved one after the other, and the second sees the first. `p_step`, the step that just
-- ended, counts down the `waiting` of the steps after it, once (its `ended` flag), and only
-- those are candidates: a join's readiness is a counter, not a read of its 1,000 upstream
-- steps at each one's end. NULL (the reviewer's sweep, a retry): every step's `ended` and
-- `waiting` are counted again from the runs, and every held step is a candidate. A candidate
-- is decided from its upstream runs themselves (read once, when it is ready), and each write
-- is guarded by the state it changes, so running it again changes nothing. Returns how many
-- steps it released or skipped.
-- name: resolve_function
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

-- The trigger's function: the step runs a statement ended resolve their workflow runs, in
-- (workflow run, step) order; once per statement, as complete.sql's trigger. A statement that
-- ended no step run reads tasks_workflowstep once: one scan of the unique index on its run_id,
-- keyed by the ended runs' ids (none for a claim or a heartbeat).
-- name: step_ended_function
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

-- AFTER UPDATE ... FOR EACH STATEMENT with the statement's old and new rows, on a run's final
-- outcome only (a retry goes back to `scheduled`, not here).
-- name: step_ended_trigger
DROP TRIGGER IF EXISTS runs_ended_resolve_steps ON tasks_run;
CREATE TRIGGER runs_ended_resolve_steps AFTER UPDATE ON tasks_run
    REFERENCING OLD TABLE AS runs_before NEW TABLE AS runs_after
    FOR EACH STATEMENT EXECUTE FUNCTION tasks_runs_resolve_steps();

-- Remove the trigger and the functions (a migration's reverse).
-- name: drop_workflow_functions
DROP TRIGGER IF EXISTS runs_ended_resolve_steps ON tasks_run;
DROP FUNCTION IF EXISTS tasks_runs_resolve_steps();
DROP FUNCTION IF EXISTS tasks_workflow_resolve(uuid, text);
DROP FUNCTION IF EXISTS tasks_workflow_output(text);

-- The reviewer's sweep: running workflow runs with a step left unresolved (all upstream steps
-- ended, still held) or every step ended, oldest first, locked SKIP LOCKED so two reviewers
-- share them; each is then resolved (resolve_function).
-- name: unresolved_workflow_runs
SELECT w.id FROM tasks_workflowrun w
 WHERE w.status = 'running'
   AND (NOT EXISTS (SELECT 1 FROM tasks_workflowstep s LEFT JOIN tasks_run r ON r.id = s.run_id
                     WHERE s.workflow_run_id = w.id
                       AND r.status NOT IN ('succeeded', 'failed', 'cancelled', 'skipped'))
        OR EXISTS (SELECT 1 FROM tasks_workflowstep s JOIN tasks_run r ON r.id = s.run_id
                    WHERE s.workflow_run_id = w.id AND r.status = 'waiting_for_resource'
                      AND r.wait_kind = 'upstream'
                      AND NOT EXISTS (
                          SELECT 1 FROM tasks_workflowstep us JOIN tasks_run u ON u.id = us.run_id
                           WHERE us.workflow_run_id = w.id AND us.step_id = ANY(s.after)
                             AND u.status NOT IN ('succeeded', 'failed', 'cancelled',
                                                  'skipped'))))
 ORDER BY w.started_at
 LIMIT %(limit)s
   FOR UPDATE SKIP LOCKED

-- Resolve one workflow run (the reviewer's, for a run the sweep found).
-- name: resolve_workflow_run
SELECT tasks_workflow_resolve(%(id)s, NULL)
