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
-- too: the task's row is locked first and the runs read after it (a statement of its own, so a
-- snapshot taken once the other transaction has committed). Only tasks that can complete are
-- locked; a recurring task still planning (next_unplanned_at set) costs one index probe.
-- name: complete_task_function
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

-- AFTER ... FOR EACH ROW: queued per ended run, fired once the statement has run. The WHEN is
-- evaluated without calling the function: a claim or a heartbeat queues nothing.
-- name: complete_task_trigger
DROP TRIGGER IF EXISTS run_ended_completes_task ON tasks_run;
CREATE TRIGGER run_ended_completes_task AFTER UPDATE OF status ON tasks_run FOR EACH ROW
    WHEN (NEW.status IN ('succeeded', 'failed', 'cancelled', 'skipped')
          AND OLD.status NOT IN ('succeeded', 'failed', 'cancelled', 'skipped'))
    EXECUTE FUNCTION tasks_run_complete_task();

-- Remove the trigger and its function (a migration's reverse).
-- name: drop_complete_task
DROP TRIGGER IF EXISTS run_ended_completes_task ON tasks_run;
DROP FUNCTION IF EXISTS tasks_run_complete_task();
