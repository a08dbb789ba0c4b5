-- The reviewer's expectation checks (tasks/transitions/expectations.py): `late`, `too_slow`,
-- `overdue`, each one statement over the health rows of the tasks that expect it (a small
-- table: one row per task with expectations). A first, read-only part finds what is due; only
-- the rows concerned are then locked, with SKIP LOCKED, so N reviewers judge each task once
-- between them, and moved on (a cursor or the health) in the same statement, so no pass
-- raises the same alert again; the found rows are checked again against the locked row's
-- cursor, which another reviewer may have moved since the snapshot. A healthy task's row is
-- written once a minute at most (`cursor_every`), not once a pass. Runs are read through the
-- (task_id, scheduled_at) index between a task's cursor and now, or from the running runs
-- (run_running_idx): the cost follows the tasks and the runs in flight, never the history.
-- Each answers (run id, task id, attempt) of the alerts to queue.

-- A run not started `start_within` after its scheduled_at makes the task `late`: the alert when
-- the task was `up` (a graver state stays), or as a reminder once `repeat_every` has passed
-- since the last one. The cursor `late_through` moves to now - start_within: the runs
-- scheduled up to it have been judged (a task with none late moves it every `cursor_every`
-- seconds, which bounds the runs each pass reads). A backfilled run is history replayed on
-- request, due long ago by design: never late.
-- name: late
WITH found AS (
    SELECT h.task_id, r.id AS run_id, r.scheduled_at
      FROM tasks_taskhealth h CROSS JOIN LATERAL (
           SELECT r.id, r.scheduled_at FROM tasks_run r
            WHERE r.task_id = h.task_id AND r.scheduled_at > h.late_through
              AND r.scheduled_at <= statement_timestamp() - make_interval(secs => h.start_within)
              AND r.attempt = 0 AND r.status IN ('scheduled', 'waiting_for_resource')
              AND NOT r.backfill
            ORDER BY r.scheduled_at LIMIT 1) AS r
     WHERE h.start_within IS NOT NULL
), h AS (
    SELECT task_id, health, repeat_every, alerted_at, late_through,
           statement_timestamp() - make_interval(secs => start_within) AS through
      FROM tasks_taskhealth
     WHERE start_within IS NOT NULL
       AND (task_id IN (SELECT task_id FROM found)
            OR late_through < statement_timestamp()
                              - make_interval(secs => start_within + %(cursor_every)s))
       FOR UPDATE SKIP LOCKED
), late AS (
    SELECT h.task_id, f.run_id,
           h.health = 'up'
               OR (h.health = 'late' AND h.repeat_every IS NOT NULL
                   AND h.alerted_at <= clock_timestamp() - make_interval(secs => h.repeat_every))
               AS alert
      FROM h JOIN found f ON f.task_id = h.task_id AND f.scheduled_at > h.late_through
), moved AS (
    UPDATE tasks_taskhealth t
       SET late_through = h.through,
           health = CASE WHEN late.alert THEN 'late' ELSE t.health END,
           changed_at = CASE WHEN late.alert AND t.health <> 'late' THEN clock_timestamp()
                             ELSE t.changed_at END,
           alerted_at = CASE WHEN late.alert THEN clock_timestamp() ELSE t.alerted_at END
      FROM h LEFT JOIN late ON late.task_id = h.task_id
     WHERE t.task_id = h.task_id AND h.through > h.late_through
    RETURNING t.task_id, late.run_id, late.alert
)
SELECT run_id, task_id, 0 FROM moved WHERE alert ORDER BY task_id

-- A run still running `duration.max` after it started: `too_slow` for that attempt, once (the
-- cursor `slow_through` moves to now - max: runs started up to it have been judged). Only the
-- running runs are read, so a task with none too slow is neither locked nor written.
-- name: too_slow
WITH found AS (
    SELECT r.id, r.task_id, r.attempt, r.started_at
      FROM tasks_run r JOIN tasks_taskhealth h ON h.task_id = r.task_id
     WHERE r.status = 'running' AND h.max_duration IS NOT NULL
       AND r.started_at > h.slow_through
       AND r.started_at <= statement_timestamp() - make_interval(secs => h.max_duration)
), h AS (
    SELECT task_id, slow_through,
           statement_timestamp() - make_interval(secs => max_duration) AS through
      FROM tasks_taskhealth
     WHERE max_duration IS NOT NULL AND task_id IN (SELECT task_id FROM found)
       FOR UPDATE SKIP LOCKED
), slow AS (
    SELECT f.id, f.task_id, f.attempt
      FROM found f JOIN h ON h.task_id = f.task_id AND f.started_at > h.slow_through
), moved AS (
    UPDATE tasks_taskhealth t SET slow_through = h.through
      FROM h WHERE t.task_id = h.task_id AND h.through > h.slow_through
)
SELECT id, task_id, attempt FROM slow ORDER BY task_id, id

-- No success for `success_within` makes an `up` or `late` task `overdue` (a `failing` one
-- stays failing), with the task's latest run due by now as the one that shows it; a reminder
-- once `repeat_every` has passed. A task with no run due yet is alerted without a run (NULL):
-- the dead man's switch, where nothing ran at all.
-- name: overdue
WITH h AS (
    SELECT task_id, health
      FROM tasks_taskhealth
     WHERE success_within IS NOT NULL
       AND succeeded_at <= statement_timestamp() - make_interval(secs => success_within)
       AND (health IN ('up', 'late')
            OR (health = 'overdue' AND repeat_every IS NOT NULL
                AND alerted_at <= clock_timestamp() - make_interval(secs => repeat_every)))
       FOR UPDATE SKIP LOCKED
), moved AS (
    UPDATE tasks_taskhealth t
       SET health = 'overdue',
           changed_at = CASE WHEN t.health <> 'overdue' THEN clock_timestamp()
                             ELSE t.changed_at END,
           alerted_at = clock_timestamp()
      FROM h WHERE t.task_id = h.task_id
    RETURNING t.task_id
)
SELECT r.id, m.task_id, coalesce(r.attempt, 0)
  FROM moved m LEFT JOIN LATERAL (
       SELECT id, attempt FROM tasks_run
        WHERE task_id = m.task_id AND scheduled_at <= statement_timestamp()
        ORDER BY scheduled_at DESC LIMIT 1) AS r ON true
 ORDER BY m.task_id

-- Runs the reviewer's rescue recorded `failed` (no attempts left) count towards the streak of
-- final failures, as the worker's outcome statement counts them (claim.sql `judge_ctes`, whose
-- rules these are): `failing` once the streak reaches failure_streak, or a reminder. Rows
-- locked in the rescue's transaction; tasks that expect nothing have no row and cost nothing.
-- name: rescued_failures
WITH d AS (
    SELECT * FROM unnest(%(runs)s::uuid[], %(tasks)s::uuid[]) AS d(id, task_id)
), locked AS (
    SELECT h.task_id, h.health, h.failures, h.failure_streak, h.repeat_every, h.alerted_at
      FROM tasks_taskhealth h WHERE h.task_id = ANY(%(tasks)s::uuid[])
       FOR UPDATE
), judged AS (
    SELECT j.*,
           CASE WHEN j.failure_streak IS NOT NULL AND j.failures_after >= j.failure_streak
                THEN 'failing' ELSE j.health END AS health_after
      FROM (SELECT l.*, d.id, l.failures + count(*) OVER (PARTITION BY d.task_id)
                   AS failures_after,
                   row_number() OVER (PARTITION BY d.task_id ORDER BY d.id DESC) AS nth
              FROM d JOIN locked l ON l.task_id = d.task_id) AS j
     WHERE j.nth = 1
), alerts AS (
    SELECT id, task_id, health_after AS event FROM judged
     WHERE health_after <> health
        OR (health_after <> 'up' AND repeat_every IS NOT NULL
            AND (alerted_at IS NULL
                 OR alerted_at <= clock_timestamp() - make_interval(secs => repeat_every)))
), written AS (
    UPDATE tasks_taskhealth h
       SET health = j.health_after, failures = j.failures_after,
           changed_at = CASE WHEN j.health_after <> j.health THEN clock_timestamp()
                             ELSE h.changed_at END,
           alerted_at = CASE WHEN j.id IN (SELECT id FROM alerts) THEN clock_timestamp()
                             ELSE h.alerted_at END
      FROM judged j WHERE h.task_id = j.task_id
)
SELECT id, task_id, event FROM alerts ORDER BY task_id

-- A workflow's `expect.success_within` (docs/workflows.md, "Expectations"): overdue when no
-- workflow run of it succeeded within that many seconds of its lapse's start, the end of its
-- latest successful workflow run (latest by start: workflow_run_workflow_idx, read back to the
-- first success) or else its creation. An overdue workflow's `overdue_from` moves to that start,
-- which queues `workflow_overdue` (a trigger the notifications app installs on the row): once
-- per lapse, since a lapse's start is moved to once. One no longer overdue (a success since, or
-- its expectation removed) is `ok` again, queuing nothing. Only the rows to change are locked,
-- with SKIP LOCKED, and checked again against the locked row, which another reviewer may have
-- changed since the snapshot. Answers (workflow id, health) of the rows changed.
-- name: workflow_overdue
WITH found AS (
    SELECT w.id, coalesce(s.finished_at, w.created_at) AS lapse_from,
           coalesce(coalesce(s.finished_at, w.created_at) <= statement_timestamp()
                    - make_interval(secs => (w.expect ->> 'success_within')::double precision),
                    false) AS overdue
      FROM tasks_workflow w LEFT JOIN LATERAL (
           SELECT r.finished_at FROM tasks_workflowrun r
            WHERE r.workflow_id = w.id AND r.status = 'succeeded'
            ORDER BY r.started_at DESC LIMIT 1) AS s ON true
     WHERE w.expect ? 'success_within' OR w.health = 'overdue'
), locked AS (
    SELECT w.id, f.lapse_from, f.overdue
      FROM tasks_workflow w JOIN found f ON f.id = w.id
     WHERE (f.overdue AND (w.health = 'ok' OR w.overdue_from IS DISTINCT FROM f.lapse_from))
        OR (NOT f.overdue AND w.health = 'overdue')
       FOR UPDATE OF w SKIP LOCKED
)
UPDATE tasks_workflow w
   SET health = CASE WHEN l.overdue THEN 'overdue' ELSE 'ok' END,
       overdue_from = CASE WHEN l.overdue THEN l.lapse_from ELSE w.overdue_from END
  FROM locked l
 WHERE w.id = l.id
RETURNING w.id, w.health
