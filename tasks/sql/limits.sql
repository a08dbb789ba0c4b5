-- Limit keys' new limits, for the next claim (tasks/transitions/limits.py, `set_limits`): set
-- on the key (declared), or a task's, which changes a key no one declared limits on, also when
-- the two race.

-- A concurrency key's new limit; runs already running go on.
-- name: set_concurrency_limits
UPDATE tasks_concurrencykey k
   SET max_running = %(limit)s, declared = declared OR %(declared)s, updated_at = now()
 WHERE k.id = %(id)s AND (%(declared)s OR NOT k.declared)

-- A rate key's new limit and window: the log is kept as it is (a lower limit trims it at the
-- next start), and the instant the window frees is computed again from it.
-- name: set_rate_limits
UPDATE tasks_ratekey k
   SET rate_limit = %(limit)s, per_seconds = %(per)s, declared = declared OR %(declared)s,
       updated_at = now(),
       held_until = CASE WHEN cardinality(k.starts) >= %(limit)s
                         THEN k.starts[cardinality(k.starts) - %(limit)s + 1]
                              + make_interval(secs => %(per)s) END
 WHERE k.id = %(id)s AND (%(declared)s OR NOT k.declared)
