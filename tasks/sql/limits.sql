-- Limit keys outside the claim (tasks/transitions/limits.py): new limits, the due runs a full
-- key holds back marked waiting (the reviewer), the busiest keys (/metrics).

-- What every change of limits sets and when (`set_limits`): declared, or a task's, which changes
-- a key no one declared, also when the two race. The next claim applies the new limits.
-- name: limits_set
declared = declared OR %(declared)s, updated_at = now()
 WHERE k.id = %(id)s AND (%(declared)s OR NOT k.declared)

-- A concurrency key's new limit; runs already running go on.
-- name: set_concurrency_key_limits
UPDATE tasks_concurrencykey k SET max_running = %(limit)s, {limits_set}

-- A rate key's new limit and window: its log of starts is kept (a lower limit trims it at the
-- next start) and when its window frees computed again from it.
-- name: set_rate_key_limits
UPDATE tasks_ratekey k
   SET held_until = CASE WHEN cardinality(k.starts) >= %(limit)s
                         THEN k.starts[cardinality(k.starts) - %(limit)s + 1]
                              + make_interval(secs => %(per)s) END,
       rate_limit = %(limit)s, per_seconds = %(per)s, {limits_set}

-- Due runs of a full key (`full_keys`: id, reason) that no claim has looked at (the claim skips
-- a full key's runs) wait with the reason the claim writes; a batch per key and pass, oldest
-- first; runs a claim has locked are left to it. `column` is the run's key, `kind` its wait_kind.
-- name: held_by_full_key(column, kind)
judged AS (
    SELECT w.id, f.reason
      FROM full_keys f
     CROSS JOIN LATERAL (
           SELECT r.id FROM tasks_run r
            WHERE {column} = f.id
              AND r.status IN ('scheduled', 'waiting_for_resource')
              AND r.execute_at <= statement_timestamp()
              AND (r.status = 'scheduled' OR r.wait_kind = {kind})
            ORDER BY r.priority DESC, r.execute_at, r.id
            LIMIT %(batch)s
              FOR UPDATE OF r SKIP LOCKED) AS w
)
UPDATE tasks_run r
   SET status = 'waiting_for_resource', wait_kind = {kind}, wait_reason = judged.reason
  FROM judged
 WHERE r.id = judged.id AND (r.status <> 'waiting_for_resource' OR r.wait_reason <> judged.reason)
RETURNING r.id

-- Concurrency keys at their limit.
-- name: hold_keyed
WITH full_keys AS (
    SELECT k.id, 'waiting for concurrency key ' || k.name || ' ('
                 || least(count(*), k.max_running) || ' of ' || k.max_running
                 || ' running)' AS reason
      FROM tasks_run r JOIN tasks_concurrencykey k ON k.id = r.concurrency_key_id
     WHERE r.status = 'running' AND r.concurrency_key_id IS NOT NULL
     GROUP BY k.id, k.name, k.max_running
    HAVING count(*) >= k.max_running
), {held_by_full_key(r.concurrency_key_id, 'concurrency_key')}

-- Rate keys whose window is full.
-- name: hold_rate_limited
WITH full_keys AS (
    SELECT k.id, 'rate limit ' || k.name || ': ' || k.rate_limit || ' per ' || k.per_seconds
                 || ' s reached, next start at '
                 || to_char(k.held_until AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
                 AS reason
      FROM tasks_ratekey k
     WHERE k.held_until > statement_timestamp()
), {held_by_full_key(r.rate_key_id, 'rate_key')}

-- The metrics' busiest keys (scheduler_project/web/metrics.py): each count is one range of a
-- keyed-runs partial index; a key's due runs are counted up to %(cap)s.
-- name: due_capped(column)
(SELECT count(*) AS waiting FROM (
     SELECT FROM tasks_run
      WHERE {column} = k.id AND status IN ('scheduled', 'waiting_for_resource')
        AND execute_at <= now()
      LIMIT %(cap)s) due)

-- Concurrency keys by runs running plus due, with their limit.
-- name: busiest_concurrency_keys
SELECT k.name, coalesce(k.owner_id::text, 'global'), k.max_running, r.running, w.waiting
  FROM tasks_concurrencykey k
 CROSS JOIN LATERAL (SELECT count(*) AS running FROM tasks_run
                      WHERE concurrency_key_id = k.id AND status = 'running') r
 CROSS JOIN LATERAL {due_capped(concurrency_key_id)} w
 ORDER BY r.running + w.waiting DESC, k.id
 LIMIT %(top)s

-- Rate keys by starts in the window plus due, with their limit and window.
-- name: busiest_rate_keys
SELECT k.name, coalesce(k.owner_id::text, 'global'), k.rate_limit, k.per_seconds, u.used, w.waiting
  FROM tasks_ratekey k
 CROSS JOIN LATERAL (SELECT least(k.rate_limit, count(*)) AS used FROM unnest(k.starts) AS s(at)
                      WHERE s.at > now() - make_interval(secs => k.per_seconds)) u
 CROSS JOIN LATERAL {due_capped(rate_key_id)} w
 ORDER BY u.used + w.waiting DESC, k.id
 LIMIT %(top)s
