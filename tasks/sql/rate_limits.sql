-- Rate limits outside the claim (tasks/transitions/limits.py, RATE).

-- Due runs of a rate key whose window is full that no claim has looked at (the claim's
-- candidates skip them, so that they never take another run's place): they wait with the
-- reason the claim writes for the runs it holds back, which names the key's next start. A
-- batch per key and pass, oldest first; runs a claim has locked are left to it. The claim
-- clears the reason when it starts them.
-- name: hold_rate_limited
WITH full_keys AS (
    SELECT k.id, k.name, k.rate_limit, k.per_seconds, k.held_until FROM tasks_ratekey k
     WHERE k.held_until > statement_timestamp()
), judged AS (
    SELECT w.id, 'rate limit ' || f.name || ': ' || f.rate_limit || ' per ' || f.per_seconds
                 || ' s reached, next start at '
                 || to_char(f.held_until AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
                 AS reason
      FROM full_keys f
     CROSS JOIN LATERAL (
           SELECT r.id FROM tasks_run r
            WHERE r.rate_key_id = f.id
              AND r.status IN ('scheduled', 'waiting_for_resource')
              AND r.execute_at <= statement_timestamp()
              AND (r.status = 'scheduled' OR r.wait_kind = 'rate_key')
            ORDER BY r.priority DESC, r.execute_at, r.id
            LIMIT %(batch)s
              FOR UPDATE OF r SKIP LOCKED) AS w
)
UPDATE tasks_run r
   SET status = 'waiting_for_resource', wait_kind = 'rate_key', wait_reason = judged.reason
  FROM judged
 WHERE r.id = judged.id AND (r.status <> 'waiting_for_resource' OR r.wait_reason <> judged.reason)
RETURNING r.id
