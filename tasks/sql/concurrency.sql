-- Concurrency keys outside the claim (tasks/transitions/limits.py, CONCURRENCY).

-- Due runs of a key at its limit that no claim has looked at (the claim's candidates skip a
-- full key's runs, so that they never take another run's place): they wait with the reason the
-- claim writes for the runs it holds back. A batch per key and pass, oldest first; runs a
-- claim has locked are left to it. The claim clears the reason when it starts them.
-- name: hold_keyed
WITH full_keys AS (
    SELECT k.id, k.name, k.max_running, count(*) AS running
      FROM tasks_run r JOIN tasks_concurrencykey k ON k.id = r.concurrency_key_id
     WHERE r.status = 'running' AND r.concurrency_key_id IS NOT NULL
     GROUP BY k.id, k.name, k.max_running
    HAVING count(*) >= k.max_running
), judged AS (
    SELECT w.id, 'waiting for concurrency key ' || f.name || ' ('
                 || least(f.running, f.max_running) || ' of ' || f.max_running
                 || ' running)' AS reason
      FROM full_keys f
     CROSS JOIN LATERAL (
           SELECT r.id FROM tasks_run r
            WHERE r.concurrency_key_id = f.id
              AND r.status IN ('scheduled', 'waiting_for_resource')
              AND r.execute_at <= statement_timestamp()
              AND (r.status = 'scheduled' OR r.wait_kind = 'concurrency_key')
            ORDER BY r.priority DESC, r.execute_at, r.id
            LIMIT %(batch)s
              FOR UPDATE OF r SKIP LOCKED) AS w
)
UPDATE tasks_run r
   SET status = 'waiting_for_resource', wait_kind = 'concurrency_key', wait_reason = judged.reason
  FROM judged
 WHERE r.id = judged.id AND (r.status <> 'waiting_for_resource' OR r.wait_reason <> judged.reason)
RETURNING r.id
