-- Reads of the admin console's pages (tasks/admin/strips.py).

-- The latest `count` runs of each task of a page, newest first per task, for its strip of
-- squares: one backward probe of run_unique_task_scheduled_at (task, scheduled_at) per task,
-- skipping only the few runs planned ahead (history.upcoming: not begun, due at `now` or later),
-- so a task with a million runs costs what a task with thirty does. The columns the strip and
-- the task page's table show only (not a run's output).
-- name: strips
SELECT r.*
FROM unnest(%(task_ids)s::uuid[]) AS page (task_id)
CROSS JOIN LATERAL (
    SELECT run.id, run.task_id, run.status, run.scheduled_at, run.started_at, run.finished_at,
           run.attempt, run.max_attempts, run.error
    FROM tasks_run AS run
    WHERE run.task_id = page.task_id
      AND NOT (run.status IN ('scheduled', 'waiting_for_resource')
               AND run.attempt = 0 AND run.scheduled_at >= %(now)s)
    ORDER BY run.scheduled_at DESC
    LIMIT %(count)s
) AS r
ORDER BY r.task_id, r.scheduled_at DESC
