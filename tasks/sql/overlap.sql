-- Overlap policies (tasks/transitions/overlap.py), applied to runs a worker just claimed.

-- The claimed runs' tasks' other runs in flight.
-- name: others_running
-- The tasks' runs in flight other than this worker's fresh claims.
SELECT id, task_id, attempt FROM tasks_run
 WHERE task_id = ANY(%(tasks)s) AND status = 'running' AND NOT (id = ANY(%(mine)s))

-- Record a claimed run that must not start as skipped or cancelled.
-- name: set_aside
-- A claimed run that must not start is recorded skipped or cancelled; it never ran, so the
-- claim's attempt is given back.
UPDATE tasks_run SET status = %(status)s, attempt = attempt - 1, finished_at = clock_timestamp(),
       error = %(error)s, skip_kind = %(skip_kind)s
 WHERE id = ANY(%(ids)s) AND status = 'running' AND worker = %(worker)s
RETURNING id, task_id
