-- The reviewer's transitions (tasks/transitions/rescue.py).

-- Return the runs of workers that stopped heart-beating to the queue, or fail them.
-- name: rescue
WITH stale AS (
    SELECT id, worker FROM tasks_run
     WHERE status = 'running'
       AND heartbeat_at < clock_timestamp() - make_interval(secs => %(after)s)
     ORDER BY heartbeat_at
     LIMIT %(batch)s
     FOR UPDATE SKIP LOCKED
), moved AS (
    UPDATE tasks_run r
       SET status = CASE WHEN r.attempt < r.max_attempts THEN 'scheduled' ELSE 'failed' END,
           execute_at = CASE WHEN r.attempt < r.max_attempts THEN clock_timestamp()
                             ELSE r.execute_at END,
           finished_at = CASE WHEN r.attempt < r.max_attempts THEN NULL
                              ELSE clock_timestamp() END,
           error = 'worker ' || r.worker || ' stopped heart-beating; run rescued',
           heartbeat_at = NULL,
           worker = CASE WHEN r.attempt < r.max_attempts THEN '' ELSE r.worker END,
           -- A run queued again takes its task's requests and keys as they are now (a change
           -- of the task while it ran moved only its runs not started), as any run made now.
           cpu_millis = CASE WHEN r.attempt < r.max_attempts THEN t.cpu_millis
                             ELSE r.cpu_millis END,
           memory_bytes = CASE WHEN r.attempt < r.max_attempts THEN t.memory_bytes
                               ELSE r.memory_bytes END,
           concurrency_key_id = CASE WHEN r.attempt < r.max_attempts THEN t.concurrency_key_id
                                     ELSE r.concurrency_key_id END,
           rate_key_id = CASE WHEN r.attempt < r.max_attempts THEN t.rate_key_id
                              ELSE r.rate_key_id END
      FROM stale, tasks_task t
     WHERE r.id = stale.id AND t.id = r.task_id
    RETURNING r.id, r.attempt, r.status, r.started_at, r.error, r.task_id,
              stale.worker AS old_worker
), recorded AS (
    INSERT INTO tasks_attempt (run_id, number, worker, started_at, finished_at, outcome, error)
    SELECT id, attempt, old_worker, started_at, clock_timestamp(), 'rescued', error FROM moved
    ON CONFLICT (run_id, number) DO NOTHING
    RETURNING run_id
)
SELECT id, status, task_id FROM moved

-- A batch per pass, in the claim's order (run_claimable_idx), skipping runs another transaction
-- holds: a claim taking one makes it running anyway, and an UPDATE waiting on claims' (or a
-- second reviewer's) row locks would hold every due run it has locked out of the claims
-- meanwhile, the oldest first, just when a backlog makes the pass long.
-- A backfilled run is due long ago by design: its SLA counts from when the backfill made it.
-- name: flag_starved
WITH starved AS (
    SELECT id FROM tasks_run
     WHERE status = 'scheduled'
       AND execute_at < clock_timestamp() - make_interval(secs => %(sla)s)
       AND (NOT backfill OR created_at < clock_timestamp() - make_interval(secs => %(sla)s))
     ORDER BY priority DESC, execute_at, id
     LIMIT %(batch)s
       FOR UPDATE SKIP LOCKED
)
UPDATE tasks_run r
   SET status = 'waiting_for_resource', wait_kind = 'start_sla',
       wait_reason = 'not started within the start SLA (' || %(sla)s || ' s)'
  FROM starved
 WHERE r.id = starved.id
RETURNING r.id, r.task_id, r.attempt

-- Due runs with requests that no live worker offers enough for (a worker's NULL capacity is no
-- limit; alive: not stopped, seen within %(dead)s seconds, as /health counts). Each waits, and
-- blocks no claim, with a reason naming what does not fit, as the task wrote it; a run whose
-- reason no longer holds (a bigger worker came) is scheduled again. Only claimable runs with
-- requests are read (run_requests_idx); runs a claim has locked are left for the next pass.
-- name: mark_unplaceable
WITH offers AS (
    SELECT coalesce(cpu_millis, %(unlimited)s) AS cpu,
           coalesce(memory_bytes, %(unlimited)s) AS memory
      FROM tasks_process
     WHERE role = 'worker' AND stopped_at IS NULL
       AND last_seen_at >= clock_timestamp() - make_interval(secs => %(dead)s)
), most AS (
    SELECT coalesce(max(cpu), 0) AS cpu, coalesce(max(memory), 0) AS memory FROM offers
), judged AS (
    SELECT r.id, r.task_id, r.cpu_millis, r.memory_bytes,
           NOT EXISTS (SELECT FROM offers o
                        WHERE r.cpu_millis <= o.cpu AND r.memory_bytes <= o.memory) AS unplaceable
      FROM tasks_run r
     WHERE r.status IN ('scheduled', 'waiting_for_resource')
       AND (r.cpu_millis > 0 OR r.memory_bytes > 0)
       AND r.execute_at <= statement_timestamp()
       AND (r.wait_kind = 'resources'
            OR NOT EXISTS (SELECT FROM offers o
                            WHERE r.cpu_millis <= o.cpu AND r.memory_bytes <= o.memory))
       FOR UPDATE OF r SKIP LOCKED
), reasons AS (
    -- Each resource above what the largest live worker offers; both when each fits some
    -- worker but no worker offers the two together.
    SELECT j.id, CASE WHEN j.unplaceable THEN 'no live worker offers ' || coalesce(
               nullif(concat_ws(', ',
                   CASE WHEN j.cpu_millis > m.cpu THEN 'cpu=' || (t.resources->>'cpu') END,
                   CASE WHEN j.memory_bytes > m.memory
                        THEN 'memory=' || (t.resources->>'memory') END), ''),
               'cpu=' || (t.resources->>'cpu') || ' with memory=' || (t.resources->>'memory'))
           ELSE '' END AS reason
      FROM judged j CROSS JOIN most m JOIN tasks_task t ON t.id = j.task_id
)
UPDATE tasks_run r
   SET status = CASE WHEN x.reason = '' THEN 'scheduled' ELSE 'waiting_for_resource' END,
       wait_kind = CASE WHEN x.reason = '' THEN '' ELSE 'resources' END, wait_reason = x.reason
  FROM reasons x
 WHERE r.id = x.id AND (r.wait_reason <> x.reason OR r.status <> 'waiting_for_resource')
RETURNING r.id, r.wait_reason
