-- Process heartbeat rows (tasks/processes.py). Positional parameters: any DB-API cursor.

-- name: beat
INSERT INTO tasks_process (name, role, host, pid, concurrency, cpu_millis, memory_bytes,
                           started_at, last_seen_at)
VALUES (%s, %s, %s, %s, %s, %s, %s, clock_timestamp(), clock_timestamp())
ON CONFLICT (name) DO UPDATE SET last_seen_at = clock_timestamp(), stopped_at = NULL,
    -- The Kubernetes worker's offer is its namespace's quota, which may change.
    cpu_millis = EXCLUDED.cpu_millis, memory_bytes = EXCLUDED.memory_bytes

-- name: mark_stopped
UPDATE tasks_process SET stopped_at = clock_timestamp() WHERE name = %s
