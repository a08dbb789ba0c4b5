-- Executable runs while no live worker can run executables (tasks/transitions/no_sandbox.py).
-- No worker claims them then (claim.sql, %(executables)s); these make them say why, as
-- `waiting_for_resource` runs do, and schedule them again once a worker can. Claimable rows a
-- claim has locked are left for the next pass.

-- Due executable runs, a batch per pass: each waits with %(reason)s (kind `sandbox`); a run
-- already waiting for this with older words gets the new ones, and so does one the start SLA
-- flagged, this one being the cause.
-- name: hold
WITH judged AS (
    SELECT r.id FROM tasks_run r JOIN tasks_task t ON t.id = r.task_id
     WHERE t.kind = 'executable' AND r.execute_at <= statement_timestamp()
       AND (r.status = 'scheduled'
            OR (r.status = 'waiting_for_resource' AND r.wait_kind IN ('sandbox', 'start_sla')
                AND r.wait_reason <> %(reason)s))
     ORDER BY r.execute_at, r.id
     LIMIT %(batch)s
       FOR UPDATE OF r SKIP LOCKED
)
UPDATE tasks_run r
   SET status = 'waiting_for_resource', wait_kind = 'sandbox', wait_reason = %(reason)s
  FROM judged WHERE r.id = judged.id
RETURNING r.id

-- A worker can run executables again: the runs that waited for one are scheduled (any worker
-- that can would claim them as they are; this clears their reason).
-- name: release
WITH judged AS (
    SELECT id FROM tasks_run
     WHERE status = 'waiting_for_resource' AND wait_kind = 'sandbox'
       FOR UPDATE SKIP LOCKED
)
UPDATE tasks_run r SET status = 'scheduled', wait_kind = '', wait_reason = ''
  FROM judged WHERE r.id = judged.id
RETURNING r.id
