-- name: complete_finished_tasks
-- A task is complete once no occurrence remains to plan and none is unfinished.
UPDATE tasks_task t SET status = 'completed', updated_at = clock_timestamp()
 WHERE t.id = ANY(%s) AND t.status = 'active' AND t.next_run_at IS NULL
   AND NOT EXISTS (SELECT 1 FROM tasks_run r WHERE r.task_id = t.id
                      AND r.status IN ('scheduled', 'running', 'waiting_for_resource'))
