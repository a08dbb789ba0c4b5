-- Zombie runs, flagged and unflagged by the worker's watch thread (tasks/transitions/zombie.py)
-- on its own connection. Fenced like an outcome: only a run this worker still holds, at the
-- attempt it observed.

-- Since when = when it went quiet (now minus how long it has been). A run already flagged is
-- left as it is, so its owner hears of it once per attempt.
-- name: flag
WITH quiet AS (
    SELECT * FROM unnest(%(ids)s::uuid[], %(attempts)s::int[], %(idle)s::float8[])
           AS q(id, attempt, idle)
), flagged AS (
    UPDATE tasks_run r SET zombie_since = clock_timestamp() - make_interval(secs => q.idle)
      FROM quiet q
     WHERE r.id = q.id AND r.attempt = q.attempt AND r.status = 'running'
       AND r.worker = %(worker)s AND r.zombie_since IS NULL
    RETURNING r.id, r.task_id, r.attempt
)
SELECT f.id, f.task_id, f.attempt, t.on_zombie FROM flagged f JOIN tasks_task t ON t.id = f.task_id

-- Clear the zombie flag of this worker's runs that are active again.
-- name: unflag
UPDATE tasks_run r SET zombie_since = NULL
  FROM unnest(%(ids)s::uuid[], %(attempts)s::int[]) AS s(id, attempt)
 WHERE r.id = s.id AND r.attempt = s.attempt AND r.status = 'running' AND r.worker = %(worker)s
