-- Process heartbeat rows (tasks/processes.py). Positional parameters: any DB-API cursor.

-- name: beat
INSERT INTO tasks_process (name, role, host, pid, concurrency, cpu_millis, memory_bytes,
                           started_at, last_seen_at)
VALUES (%s, %s, %s, %s, %s, %s, %s, clock_timestamp(), clock_timestamp())
ON CONFLICT (name) DO UPDATE SET last_seen_at = clock_timestamp(), stopped_at = NULL

-- name: mark_stopped
UPDATE tasks_process SET stopped_at = clock_timestamp() WHERE name = %s
