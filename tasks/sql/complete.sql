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
