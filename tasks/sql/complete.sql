-- Complete the given tasks that have nothing left to plan or run.
-- name: complete_finished_tasks
-- A task has ended once no occurrence remains to plan and none is unfinished: `failed` when
-- its last run (its latest begun run, tasks/history.py) failed, else `completed`.
UPDATE tasks_task t
   SET status = CASE WHEN (SELECT r.status FROM tasks_run r
                            WHERE r.task_id = t.id AND (r.attempt > 0 OR r.finished_at IS NOT NULL)
                            ORDER BY r.scheduled_at DESC LIMIT 1) = 'failed'
                     THEN 'failed' ELSE 'completed' END,
       updated_at = clock_timestamp()
 WHERE t.id = ANY(%s) AND t.status = 'active' AND t.next_unplanned_at IS NULL
   AND NOT EXISTS (SELECT 1 FROM tasks_run r WHERE r.task_id = t.id
                      AND r.status IN ('scheduled', 'running', 'waiting_for_resource'))

-- The same, by the database, for every run that ends by an UPDATE (a worker's outcome, a miss
-- or skip at claim time, a cancel, a rescue), after the whole statement. A statement's parts
-- do not see each other's changes: the cycle statement that records one run's finish and skips
-- another run of the task as missed saw the other run unfinished in both parts, and the task
-- stayed active with nothing left to run. A trigger function's statements see them. Two
-- transactions ending the task's last two runs at once each see the other's run unfinished
-- too: the tasks' rows are locked first (in id order) and the runs read after them (a statement
-- of its own, so a snapshot taken once the other transaction has committed). Only tasks that
-- can complete are locked; a recurring task still planning (next_unplanned_at set) costs one
-- index probe. Once per statement, over the runs it ended (`runs_before`, `runs_after`: the
-- statement's transition tables): a trigger per ended run cost a call and a query each, about
-- a tenth of the worker's cycle (bench/NOTEBOOK.md, "The run-end triggers once per statement").
-- name: complete_task_function
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

-- AFTER UPDATE ... FOR EACH STATEMENT, with the statement's old and new rows (a trigger with
-- transition tables takes no column list: it fires for every UPDATE of tasks_run, and the
-- function finds the runs that ended, none for a claim or a heartbeat).
-- name: complete_task_trigger
DROP TRIGGER IF EXISTS runs_ended_complete_tasks ON tasks_run;
CREATE TRIGGER runs_ended_complete_tasks AFTER UPDATE ON tasks_run
    REFERENCING OLD TABLE AS runs_before NEW TABLE AS runs_after
    FOR EACH STATEMENT EXECUTE FUNCTION tasks_runs_complete_tasks();

-- Remove the trigger and its function (a migration's reverse).
-- name: drop_complete_task
DROP TRIGGER IF EXISTS runs_ended_complete_tasks ON tasks_run;
DROP FUNCTION IF EXISTS tasks_runs_complete_tasks();
