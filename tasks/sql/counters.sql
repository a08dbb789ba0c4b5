-- Add a batch's outcomes to the /metrics counters.
-- name: count_events
-- /metrics counters (tasks/counters.py), one upsert per batch.
INSERT INTO tasks_runcounter (metric, kind, outcome, shard, value)
SELECT c.metric, t.kind, c.outcome, %(shard)s, count(*)
  FROM unnest(%(task_ids)s::uuid[], %(metrics)s::text[], %(outcomes)s::text[])
       AS c(task_id, metric, outcome)
  JOIN tasks_task t ON t.id = c.task_id
 GROUP BY c.metric, t.kind, c.outcome
 -- A fixed row order: two transactions sharing a shard then lock its rows in the same order.
 ORDER BY c.metric, t.kind, c.outcome
ON CONFLICT (metric, kind, outcome, shard)
DO UPDATE SET value = tasks_runcounter.value + EXCLUDED.value

-- Count one unexpected error in a role's loop.
-- name: count_loop_error
-- One unexpected error in a pass of a role's loop (scheduler_loop_errors_total), in its own
-- transaction: the pass that failed was rolled back.
INSERT INTO tasks_runcounter (metric, kind, outcome, shard, value)
VALUES ('loop_error', %(role)s, '', %(shard)s, 1)
ON CONFLICT (metric, kind, outcome, shard) DO UPDATE SET value = tasks_runcounter.value + 1
