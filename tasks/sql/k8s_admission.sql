-- Admission by the cluster's free capacity (tasks/worker/k8s_admission.py): the Kubernetes
-- executor reads the due runs in claim order with their requests, marks the ones capacity holds
-- back, and claims exactly the runs it admitted.

-- Due runs in the claim's order (priority, then due time), with the task's requests.
-- name: due
SELECT r.id, t.resources FROM tasks_run r JOIN tasks_task t ON t.id = r.task_id
 WHERE r.status IN ('scheduled', 'waiting_for_resource')
   AND r.execute_at <= clock_timestamp() + make_interval(secs => %(prefetch)s)
 ORDER BY r.priority DESC, r.execute_at
 LIMIT %(limit)s

-- name: mark_waiting
UPDATE tasks_run SET status = 'waiting_for_resource', wait_reason = %(reason)s
 WHERE id = ANY(%(ids)s) AND status = 'scheduled'

-- The claim (tasks/sql/claim.sql) of the runs named, those still claimable, with the claim's
-- misfire rule (`{misfire_ctes}` and `{run_all_cap}` are written in from claim.sql by
-- k8s_admission.claim_ids_sql): a missed occurrence is skipped, not claimed. The same columns,
-- plus the task's requests to reserve until the quota counts the pod.
-- name: claim_ids
WITH candidates AS (
    SELECT id, owner_id, priority, execute_at, task_id, scheduled_at, attempt, missed_after
      FROM tasks_run
     WHERE id = ANY(%(ids)s) AND status IN ('scheduled', 'waiting_for_resource')
       FOR UPDATE SKIP LOCKED
), {misfire_ctes}, picked AS (
    SELECT id FROM candidates WHERE id NOT IN (SELECT id FROM missed)
)
UPDATE tasks_run r
   SET status = 'running', attempt = r.attempt + 1, worker = %(worker)s,
       started_at = greatest(clock_timestamp(), r.execute_at),
       heartbeat_at = clock_timestamp(), wait_reason = ''
  FROM picked, tasks_task t
 WHERE r.id = picked.id AND t.id = r.task_id
   AND (SELECT count(*) FROM missed_notified) >= 0  -- makes missed_notified run (claim.sql)
RETURNING r.id, r.task_id, r.scheduled_at, r.execute_at, r.attempt, r.max_attempts,
          t.kind, t.payload, t.executable, t.timeout, t.retry_backoff_base,
          t.retry_backoff_cap, clock_timestamp() AS claimed_at,
          coalesce(t.schedule->>'overlap', 'allow') AS overlap, r.priority, r.cpu_millis,
          r.memory_bytes, t.resources
