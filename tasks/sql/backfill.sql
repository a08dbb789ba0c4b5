-- Record a task's past occurrences in a range as backfilled runs.
-- name: insert_backfill
-- A backfill's runs (tasks/transitions/backfill.py), one INSERT for the whole range: an
-- occurrence already recorded (planned, run, skipped, or backfilled before) keeps its row, so a
-- repeated backfill inserts nothing twice. No missed_after: a backfilled run is never missed.
-- execute_at is scheduled_at (no jitter), so the claim takes them in scheduled_at order. The
-- requests and keys are the task's (Task.requests), as on every run made.
INSERT INTO tasks_run (id, task_id, owner_id, scheduled_at, execute_at, priority, status,
                       attempt, max_attempts, worker, finished_at, output, error, cpu_millis,
                       memory_bytes, concurrency_key_id, rate_key_id, wait_reason, skip_kind,
                       backfill, created_at)
SELECT v.id, %(task)s, %(owner)s, v.scheduled_at, v.scheduled_at, %(priority)s, v.status, 0,
       %(max_attempts)s, '', CASE WHEN v.status = 'skipped' THEN %(now)s END, '', v.error,
       %(cpu_millis)s, %(memory_bytes)s, %(concurrency_key_id)s, %(rate_key_id)s, '',
       CASE WHEN v.status = 'skipped' THEN 'exclusion' ELSE '' END, true, %(now)s
  FROM unnest(%(ids)s::uuid[], %(times)s::timestamptz[], %(statuses)s::text[],
              %(errors)s::text[]) AS v(id, scheduled_at, status, error)
    ON CONFLICT (task_id, scheduled_at) DO NOTHING
RETURNING id, status, error
