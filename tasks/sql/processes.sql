-- Process heartbeat rows (tasks/processes.py). Positional parameters: any DB-API cursor.

-- A worker's sandbox may change while it runs (bubblewrap installed or removed): every beat
-- writes it.
-- name: beat
INSERT INTO tasks_process (name, role, host, pid, concurrency, cpu_millis, memory_bytes,
                           sandbox, sandbox_error, started_at, last_seen_at)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, clock_timestamp(), clock_timestamp())
ON CONFLICT (name) DO UPDATE SET last_seen_at = clock_timestamp(), stopped_at = NULL,
                                 sandbox = EXCLUDED.sandbox,
                                 sandbox_error = EXCLUDED.sandbox_error,
    -- The Kubernetes worker's offer is its namespace's quota, which may change.
    cpu_millis = EXCLUDED.cpu_millis, memory_bytes = EXCLUDED.memory_bytes

-- Record that a role's process stopped.
-- name: mark_stopped
UPDATE tasks_process SET stopped_at = clock_timestamp() WHERE name = %s

-- Live workers (not stopped, seen within %s seconds, as /health counts) and how each runs
-- executables ("" and why not when it cannot), by name.
-- name: worker_sandboxes
SELECT name, host, pid, sandbox, sandbox_error FROM tasks_process
 WHERE role = 'worker' AND stopped_at IS NULL
   AND last_seen_at >= clock_timestamp() - make_interval(secs => %s)
 ORDER BY name
