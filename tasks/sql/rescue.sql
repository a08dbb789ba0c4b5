-- The reviewer's transitions (tasks/transitions/rescue.py).

-- name: rescue
WITH stale AS (
    SELECT id, worker FROM tasks_run
     WHERE status = 'running'
       AND heartbeat_at < clock_timestamp() - make_interval(secs => %(after)s)
     ORDER BY heartbeat_at
     LIMIT %(batch)s
     FOR UPDATE SKIP LOCKED
), moved AS (
    UPDATE tasks_run r
       SET status = CASE WHEN r.attempt < r.max_attempts THEN 'scheduled' ELSE 'failed' END,
           execute_at = CASE WHEN r.attempt < r.max_attempts THEN clock_timestamp()
                             ELSE r.execute_at END,
           finished_at = CASE WHEN r.attempt < r.max_attempts THEN NULL
                              ELSE clock_timestamp() END,
           error = 'worker ' || r.worker || ' stopped heart-beating; run rescued',
           heartbeat_at = NULL,
           worker = CASE WHEN r.attempt < r.max_attempts THEN '' ELSE r.worker END
      FROM stale
     WHERE r.id = stale.id
    RETURNING r.id, r.attempt, r.status, r.started_at, r.error, r.task_id,
              stale.worker AS old_worker
), recorded AS (
    INSERT INTO tasks_attempt (run_id, number, worker, started_at, finished_at, outcome, error)
    SELECT id, attempt, old_worker, started_at, clock_timestamp(), 'rescued', error FROM moved
    ON CONFLICT (run_id, number) DO NOTHING
    RETURNING run_id
)
SELECT id, status, task_id FROM moved

-- name: flag_starved
UPDATE tasks_run SET status = 'waiting_for_resource'
 WHERE status = 'scheduled' AND execute_at < clock_timestamp() - make_interval(secs => %(sla)s)
RETURNING id, task_id, attempt
