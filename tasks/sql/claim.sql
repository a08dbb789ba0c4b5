-- The worker's hot path: claim runs, record outcomes (fenced), renew heartbeats.
-- tasks/transitions/claim.py runs these as prepared statements (tasks/db.py prepared_cursor);
-- docs/architecture.md, "The claim", explains them. Literals (scheduler_project/sql.py): the
-- candidates' LIMIT, written in per batch size (a power of two, never a parameter: see
-- claim.claim_sql), and the misfire rule's RUN_ALL_CAP.
-- literal: candidates
-- literal: run_all_cap
-- literal: executables
-- A worker's capacity comes as %(cpu_total)s, %(memory_total)s (what it offers) and
-- %(cpu_free)s, %(memory_free)s (less what its runs in flight request); no limit is 2^62.
-- A claimed row's columns are named once, in `claimed` (claimed_columns); the statements
-- answer `claimed.*` and Python reads them by name into ClaimedRun.
-- {executables} is 0 while the worker has no sandbox: it claims no executable run (they wait
-- for a worker that has one; the reviewer says why) and does not wake for them either. A literal,
-- not a parameter: with 1 the planner drops the per-candidate task lookup from the plan; as a
-- parameter the generic plan had to cost that lookup for every candidate, PostgreSQL found it
-- dearer than re-planning, and planned the statement again on every execution (as it still
-- does with 0: a worker without a sandbox pays a planning per cycle).

-- The claim's CTEs, shared by `claim` and `cycle`: the admission rules (tasks/admission/) in
-- the order docs/architecture.md states, then the claimed runs and what they count. `finishing`
-- is the array of the runs the statement records finished (the cycle's %(ids)s; none for the
-- claim). What the outcomes add up to (`outcome_ctes`) sits between the misses and the key
-- rows: `keyed` reads it before it locks a row (see there).
-- name: claim_ctes(finishing)
capped AS (
    -- Running runs per owner (from run_running_idx, a small set), once per claim.
    SELECT owner_id, count(*) AS running FROM tasks_run
     WHERE status = 'running' AND %(owner_cap)s > 0
     GROUP BY owner_id
), key_running AS (
    -- Running runs per concurrency key, less those the cycle's batch names (the scan's shortcut).
    -- As of this statement's snapshot (run_key_running_idx: keyed running runs only; without
    -- keys, one probe of an empty index range), less the runs the statement records finished,
    -- as named (`finishing`; not `recorded`, which would make the scan wait for the outcome
    -- write: see `candidates`), so a worker's freed slot under a key is refilled in the same
    -- cycle. Only the scan's shortcut and `held_row` read it; the admission counts on `keyed`.
    SELECT concurrency_key_id AS key, count(*) AS running FROM tasks_run
     WHERE status = 'running' AND concurrency_key_id IS NOT NULL
       AND id <> ALL ({finishing})
     GROUP BY concurrency_key_id
), candidates AS (
    -- Due claimable runs this worker could hold, in claim order, locked (SKIP LOCKED).
    -- One index range scan of run_claimable_idx (priority DESC, execute_at) per priority, 9
    -- down to 0 (run_priority_range): each reads due runs only, in execute_at order, and the
    -- outer LIMIT stops as soon as the batch is full. A single ORDER BY priority DESC,
    -- execute_at scan would instead either sort every due run (backlog-sized work per claim) or
    -- walk past the future runs of higher priorities, and which of the two PostgreSQL picks
    -- depends on its statistics: with millions of finished runs in the table it picked the sort.
    -- statement_timestamp(), not clock_timestamp(): a volatile bound cannot be an index bound.
    -- A run requesting more than this worker offers at all is no candidate: it never blocks
    -- this worker (the reviewer says when no live worker can hold it). The runs of keys the
    -- snapshot shows full are skipped, so a run held by its key never takes the place of another
    -- key's run or an unkeyed one (keys skip over; capacity does not): full concurrency keys
    -- from `key_running`, full rate keys from rate_key_held_idx (empty while no key is full).
    -- Only a shortcut: the admission below decides, under the keys' row locks.
    -- %(since)s is the worker's claim floor (claim_floor below; NULL: none): the range starts
    -- there, not at the first entry of the priority, so the entries of runs claimed since an
    -- old snapshot began, dead but not yet removable, are not read on every claim.
    -- The first thing the statement does (`claimed` reads it through `missed`), before anything
    -- that can wait: a run another worker claimed after this statement's snapshot is still
    -- claimable in it, and locking it locks its newest version, which is rechecked, found
    -- running, dropped, and stays locked to this statement's commit, so that worker's next
    -- cycle waits to record it. After a wait (the outcome write, a key row) every run claimed
    -- meanwhile is such a run, and the two workers' cycles then ran one after the other
    -- (bench/NOTEBOOK.md, "Keyed runs: the claim's scan before the outcome write").
    SELECT r.id, r.owner_id, r.priority, r.execute_at, r.task_id, r.scheduled_at, r.attempt,
           r.missed_after, r.cpu_millis, r.memory_bytes, r.concurrency_key_id AS ckey,
           r.rate_key_id AS rkey
      FROM generate_series(9, 0, -1) AS p(priority)
     CROSS JOIN LATERAL (
           SELECT r.id, r.owner_id, r.priority, r.execute_at, r.task_id, r.scheduled_at,
                  r.attempt, r.missed_after, r.cpu_millis, r.memory_bytes, r.concurrency_key_id,
                  r.rate_key_id
             FROM tasks_run r
            WHERE r.status IN ('scheduled', 'waiting_for_resource')
              AND r.priority = p.priority
              AND r.execute_at <= statement_timestamp() + make_interval(secs => %(prefetch)s)
              AND r.execute_at >= coalesce(%(since)s::timestamptz, '-infinity')
              AND r.cpu_millis <= %(cpu_total)s AND r.memory_bytes <= %(memory_total)s
              AND ({executables} = 1
                   OR (SELECT t.kind FROM tasks_task t WHERE t.id = r.task_id) <> 'executable')
              AND r.owner_id NOT IN (SELECT owner_id FROM capped WHERE running >= %(owner_cap)s)
              AND (r.concurrency_key_id IS NULL
                   OR r.concurrency_key_id NOT IN (
                          SELECT kr.key FROM key_running kr
                            JOIN tasks_concurrencykey k ON k.id = kr.key
                           WHERE kr.running >= k.max_running))
              AND (r.rate_key_id IS NULL
                   OR r.rate_key_id NOT IN (
                          SELECT k.id FROM tasks_ratekey k
                           WHERE k.held_until > statement_timestamp()))
            ORDER BY r.execute_at
            LIMIT {candidates}
              FOR UPDATE OF r SKIP LOCKED) AS r
     LIMIT {candidates}
), {misfire_ctes}, {outcome_ctes}, {key_ctes}, {rate_ctes}, fitting AS (
    -- The admitted candidates, capped per owner, with whether each fits the free capacity.
    -- The per-owner cap also holds within this batch: an owner's n-th candidate is taken only
    -- while its running runs plus n stay within the cap. Then capacity, in claim order: a run
    -- fits while the requests of it and of every run before it fit the free capacity. The sums
    -- only grow, so the first run that does not fit stops every run after it: strict priority,
    -- nothing lower starts in its place (no backfill). Without requests the sums stay 0.
    SELECT id, task_id, execute_at, cpu_millis, memory_bytes, ckey,
           row_number() OVER w AS n,
           sum(cpu_millis) OVER w <= %(cpu_free)s
               AND sum(memory_bytes) OVER w <= %(memory_free)s AS fits
      FROM (
        SELECT c.*, coalesce(k.running, 0) AS running,
               row_number() OVER (PARTITION BY c.owner_id
                                  ORDER BY c.priority DESC, c.execute_at) AS nth
          FROM candidates c LEFT JOIN capped k ON k.owner_id = c.owner_id
         WHERE c.id NOT IN (SELECT id FROM missed)
           AND (c.ckey IS NULL OR c.id IN (SELECT id FROM key_admission WHERE admitted))
           AND (c.rkey IS NULL OR c.id IN (SELECT id FROM rate_admission WHERE admitted))
    ) ranked
     WHERE %(owner_cap)s <= 0 OR running + nth <= %(owner_cap)s
    WINDOW w AS (ORDER BY priority DESC, execute_at, id ROWS UNBOUNDED PRECEDING)
), picked AS (
    -- The runs to claim; a rate-limited one starts at the instant its key admitted it.
    SELECT f.id, a.now AS rate_start
      FROM fitting f LEFT JOIN rate_admission a ON a.id = f.id
     WHERE f.fits AND f.n <= %(limit)s
), {rate_log_ctes}, held AS (
    -- Due candidates held back (tasks/admission/): the kind, and the words built from it.
    -- Written only when it changes: a worker held back claims again after each finished run.
    -- Capacity's words name the requests as the task wrote them; they depend on the run alone,
    -- so workers holding the same run back write them once between them. A run newly held
    -- here may fit another worker that skipped it while this claim locked it: NOTIFY (one per
    -- transaction, however many rows).
    UPDATE tasks_run r SET status = 'waiting_for_resource', wait_kind = h.kind,
                           wait_reason = h.reason
      FROM (SELECT f.id, 'capacity' AS kind,
                   CASE WHEN f.cpu_millis = 0 AND f.memory_bytes = 0
                        THEN 'waiting behind a higher-priority run that needs free capacity'
                        ELSE 'waiting for free capacity ('
                             || concat_ws(', ',
                                    CASE WHEN f.cpu_millis > 0
                                         THEN 'cpu=' || (t.resources->>'cpu') END,
                                    CASE WHEN f.memory_bytes > 0
                                         THEN 'memory=' || (t.resources->>'memory') END)
                             || ') on a worker' END AS reason
              FROM fitting f JOIN tasks_task t ON t.id = f.task_id
             WHERE NOT f.fits AND f.execute_at <= statement_timestamp()
            UNION ALL
            -- The count is of the key's slots taken by runs running (as bounded) and ahead.
            SELECT id, 'concurrency_key' AS kind,
                   'waiting for concurrency key ' || name || ' (' || taken || ' of '
                   || max_running || ' running)'
              FROM key_admission
             WHERE NOT admitted AND execute_at <= statement_timestamp()
            UNION ALL
            SELECT a.id, 'rate_key' AS kind,
                   'rate limit ' || l.name || ': ' || l.rate_limit || ' per ' || l.per_seconds
                   || ' s reached, next start at '
                   || to_char(l.held_until AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
              FROM rate_admission a JOIN rate_log l ON l.id = a.rkey
             WHERE NOT a.admitted AND a.execute_at <= a.now AND l.held_until > a.now) AS h
     WHERE r.id = h.id
       AND (r.status <> 'waiting_for_resource' OR r.wait_kind <> h.kind
            OR r.wait_reason <> h.reason)
    RETURNING r.id, pg_notify('scheduler_run_due', '')
), claimed AS (
    -- The picked runs set running under this worker, with what the worker needs to run them.
    -- No start is before a finish this statement records (`recorded`'s latest): in one slot
    -- the run handed over ends, in the history, before the next begins.
    UPDATE tasks_run r
       SET status = 'running', attempt = r.attempt + 1, worker = %(worker)s,
           started_at = coalesce(picked.rate_start,
                                 greatest(clock_timestamp(), r.execute_at,
                                          (SELECT max(finished_at) FROM recorded))),
           heartbeat_at = clock_timestamp(), zombie_since = NULL, wait_kind = '', wait_reason = ''
      FROM picked, tasks_task t
     WHERE r.id = picked.id AND t.id = r.task_id
       -- A one-time filter (evaluated once, before any row) that makes missed_notified run.
       AND (SELECT count(*) FROM missed_notified) >= 0
    RETURNING {claimed_columns}
), key_counted AS (
    -- The keys' admissions, on the rows `keyed` locked: committed with the runs they admit.
    UPDATE tasks_concurrencykey k SET admitted = k.admitted + n.admitted
      FROM (SELECT f.ckey, count(*) AS admitted FROM fitting f JOIN picked p ON p.id = f.id
             WHERE f.ckey IS NOT NULL GROUP BY f.ckey) AS n
     WHERE k.id = n.ckey
), rate_counted AS (
    -- The rate keys' logs with this claim's starts, on the rows `rate_keyed` locked.
    UPDATE tasks_ratekey k SET starts = l.starts, held_until = l.held_until
      FROM rate_log l
     WHERE k.id = l.id AND l.started > 0
)

-- What a claimed run carries to the worker: ClaimedRun's fields, by name (a test holds the two
-- equal).
-- name: claimed_columns
r.id, r.task_id, r.scheduled_at, r.execute_at, r.attempt, r.max_attempts, t.kind, t.payload,
t.executable, t.timeout, t.retry_backoff_base AS backoff_base,
t.retry_backoff_cap AS backoff_cap,
greatest(clock_timestamp(), (SELECT max(finished_at) FROM recorded)) AS claimed_at,
coalesce(t.schedule->>'overlap', 'allow') AS overlap, r.priority, r.cpu_millis, r.memory_bytes

-- Misfire at claim time (docs/schedules.md, "Misfire policy"): a candidate is missed when it is
-- the first attempt of a recurring occurrence past its `missed_after` (execute_at + the task's
-- grace) and its task's policy says so: `skip` always; `run_once` when a later occurrence of the
-- task is past its grace too (only the latest of them runs); `run_all` when RUN_ALL_CAP later
-- ones are. It is recorded `skipped` instead of claimed, its `missed` notification queued, and
-- (`outcome_ctes`) counted, and its task completed if it was the last occurrence. One-time tasks and run-now runs
-- (missed_after NULL), retries (attempt > 0) and runs on time stop at the first condition, so
-- the claim's common path reads no task. The candidates are locked by this statement and still
-- claimable, so a skip never meets a fenced finish; whichever worker meets an older occurrence
-- skips it, because the later one exists whoever holds it.
-- name: misfire_ctes
missed AS (
    -- The candidates past their misfire grace that their task's policy skips: `skipped`.
    UPDATE tasks_run r
       SET status = 'skipped', finished_at = clock_timestamp(), skip_kind = 'misfire',
           error = 'missed: not started within its misfire grace period (misfire policy)'
      FROM candidates c
     WHERE r.id = c.id AND c.missed_after < statement_timestamp() AND c.attempt = 0
       AND CASE (SELECT t.schedule->>'misfire' FROM tasks_task t WHERE t.id = c.task_id)
             WHEN 'skip' THEN true
             WHEN 'run_all' THEN (
                 SELECT count(*) FROM (
                     SELECT FROM tasks_run n
                      WHERE n.task_id = c.task_id AND n.scheduled_at > c.scheduled_at
                        AND n.missed_after < statement_timestamp()
                      LIMIT {run_all_cap}) AS later) >= {run_all_cap}
             ELSE EXISTS (
                 SELECT FROM tasks_run n
                  WHERE n.task_id = c.task_id AND n.scheduled_at > c.scheduled_at
                    AND n.missed_after < statement_timestamp())
           END
    RETURNING r.id, r.task_id
), missed_notified AS (
    -- The missed runs' events queued (outbox).
    -- The outbox's `missed` and `skipped` events (attempt 0, as planning queues them), for
    -- tasks that notify.
    SELECT notifications_enqueue(array_agg(m.id), array_agg(m.task_id), array_agg(0),
                                 array_agg(e.event), %(window)s, %(channel)s) AS queued
      FROM missed m JOIN tasks_task t ON t.id = m.task_id
     CROSS JOIN unnest(ARRAY['missed', 'skipped']) AS e(event)
     WHERE (jsonb_typeof(t.notify) = 'array' AND t.notify <> '[]'::jsonb)
        OR EXISTS (SELECT 1 FROM notifications_channel ch
                    WHERE ch.owner_id = t.owner_id AND ch.all_tasks_events <> '{{}}')
    HAVING count(*) > 0
)

-- Concurrency keys (docs/architecture.md, "Concurrency keys"): at most a key's `limit` runs
-- carrying it are running at once, across every worker. The rows of the candidates' keys are
-- locked in id order, SKIP LOCKED: a key whose row another claim holds admits none of its runs
-- in this claim (neither admitted nor held; the claim says so, `passed_row`, and its worker
-- claims again within milliseconds), so claims of one key never wait for each other's commit (with a
-- wait, two workers' keyed cycles ran one after the other: bench/NOTEBOOK.md,
-- "Keyed runs without waiting for the key row"). In read committed the lock yields each row's
-- latest committed version while everything else reads the statement's snapshot. What runs under a
-- key is then bounded from above by the snapshot's count plus the admissions committed since
-- the snapshot (the locked row's `admitted` less the snapshot's): every claim adds its
-- admissions to `admitted` in the transaction that sets them running, so a claim this snapshot
-- does not see is counted by the difference, and one it does is counted once; a run that
-- finished since is not subtracted (it only errs low). A candidate is admitted while that
-- bound plus the key's claimable runs ahead of it (priority, then execute_at: strict order
-- within a key, other workers' locked candidates ahead of the batch's first run of the key
-- included) stays below the limit. A key's limit is read from the locked row: a change applies
-- at the next claim. Without keyed candidates, `keyed` reads no row.
-- A key row is held from `keyed` to the commit, and while it is held the other claims of the
-- key admit nothing: so `keyed` first reads what the statement's outcomes add up to
-- (`completed`, `counted`, `notified`, `judged_written`: a one-time filter, evaluated before
-- any row is locked), which would otherwise run at the statement's end, under the row
-- (bench/NOTEBOOK.md, "Keyed runs: the outcome writes before the key row"). Lock order stays
-- free of deadlocks between claims: everything the statement waits for (the runs it records,
-- health rows, tasks it completes, counter rows) is taken before the first key row; key rows
-- are never waited for (SKIP LOCKED); rate key rows are waited for after them, in id order,
-- and a claim holding one waits for nothing else but another rate key row (later in the
-- order) or, in the AFTER trigger on its ended runs, their tasks' rows: another claim's
-- `completed` locks a task's row only when its snapshot shows every other run of the task
-- ended, so never while this claim's ended run is uncommitted.
-- name: key_ctes
keyed AS (
    -- The candidates' keys no other claim holds, locked in id order, with their runs running.
    -- `running`: the snapshot's running runs of the key less those this statement records
    -- finished (`recorded`: they end in the transaction that admits their successors). Read in
    -- the rows the lock takes, and the outcome CTEs in the one-time filter, so the outcome write
    -- (`done`) and its side effects run before any key row is locked: a cycle never holds a key
    -- row while its outcome write waits for a run's lock, or for a task, health or counter row.
    SELECT k.id, k.name, k.max_running, k.admitted, coalesce(n.running, 0) AS running
      FROM tasks_concurrencykey k
      LEFT JOIN (SELECT o.concurrency_key_id AS key, count(*) AS running FROM tasks_run o
                  WHERE o.status = 'running' AND o.concurrency_key_id IS NOT NULL
                    AND o.id NOT IN (SELECT run_id FROM recorded)
                  GROUP BY o.concurrency_key_id) AS n ON n.key = k.id
     WHERE k.id = ANY (ARRAY(SELECT DISTINCT ckey FROM candidates WHERE ckey IS NOT NULL))
       AND (SELECT count(*) FROM completed) + (SELECT count(*) FROM counted)
           + (SELECT count(*) FROM notified) + (SELECT count(*) FROM judged_written) >= 0
     ORDER BY k.id
       FOR NO KEY UPDATE OF k SKIP LOCKED
), key_admission AS (
    -- Whether each keyed candidate has a slot of its key, and how many are taken.
    -- A candidate's slot: what runs (the key's room: the snapshot's count plus the admissions
    -- committed since, the locked row's `admitted` less the snapshot's), plus the key's due
    -- claimable runs strictly ahead of the batch's first candidate of the key (two bounded
    -- ranges of run_key_claimable_idx, a higher priority and the same one due earlier, counted
    -- once per key, not per candidate: per candidate they were a third of a keyed cycle's time,
    -- and a sequential scan of tasks_run each when the planner judged the key unselective),
    -- plus the batch's candidates of the key before it (claim order, then id for ties: the scan
    -- returns ties in no stated order). The j-th admitted candidate of a key counts the j before
    -- it, so a batch admits at most the room. (OFFSET 0: each subquery is computed once, not
    -- inlined into every row and column that reads it.)
    SELECT id, execute_at, name, max_running, least(taken, max_running) AS taken,
           taken < max_running AS admitted
      FROM (
    SELECT c.id, c.execute_at, k.name, k.max_running, k.running + k.ahead + c.nth AS taken
      FROM (SELECT c.*, row_number() OVER (PARTITION BY c.ckey
                                           ORDER BY c.priority DESC, c.execute_at, c.id) - 1
                        AS nth
              FROM candidates c
             WHERE c.ckey IS NOT NULL AND c.id NOT IN (SELECT id FROM missed)) AS c
      JOIN (SELECT l.id, l.name, l.max_running,
                   l.running + (l.admitted - s.admitted) AS running,
                   (SELECT count(*) FROM (
                        SELECT FROM tasks_run o
                         WHERE o.concurrency_key_id = f.ckey
                           AND o.status IN ('scheduled', 'waiting_for_resource')
                           AND o.priority > f.priority
                           AND o.execute_at <= statement_timestamp()
                                               + make_interval(secs => %(prefetch)s)
                         ORDER BY o.priority DESC, o.execute_at
                         LIMIT l.max_running) AS higher)
                   + (SELECT count(*) FROM (
                        SELECT FROM tasks_run o
                         WHERE o.concurrency_key_id = f.ckey
                           AND o.status IN ('scheduled', 'waiting_for_resource')
                           AND o.priority = f.priority
                           AND o.execute_at < f.execute_at
                         ORDER BY o.priority DESC, o.execute_at
                         LIMIT l.max_running) AS earlier) AS ahead
              FROM keyed l
              JOIN tasks_concurrencykey s ON s.id = l.id
              JOIN (SELECT DISTINCT ON (c.ckey) c.ckey, c.priority, c.execute_at
                      FROM candidates c
                     WHERE c.ckey IS NOT NULL AND c.id NOT IN (SELECT id FROM missed)
                     ORDER BY c.ckey, c.priority DESC, c.execute_at, c.id) AS f
                ON f.ckey = l.id
            OFFSET 0) AS k ON k.id = c.ckey
    OFFSET 0) AS ranked
)

-- Rate limits (docs/architecture.md, "Rate limits"): at most a key's `rate_limit` runs carrying
-- it start in any `per_seconds`, across every worker: an exact sliding window, kept as a log on
-- the key row of its last `rate_limit` start times. The rows are locked in id order after every
-- concurrency key row (the one-time filter reads `keyed` to its end first), so claims lock all
-- key rows in one order, (kind, id), and never wait on each other in a cycle. Each key's `now`
-- is read after its row is locked: the lock is held to the commit, so a later claim's `now` for
-- the key is later than every start in the log it reads (the log only grows at its end). A
-- candidate is admitted when it is due at `now` and the starts in (now - per, now], plus the
-- key's due claimable runs ahead of it (as for concurrency keys: strict order within a key),
-- stay below the limit; it starts at `now` (its started_at), and `rate_counted` appends the
-- claimed ones and keeps the last `rate_limit`. A limit or window is read from the locked row: a
-- change applies at the next claim. Without rate-keyed candidates, `rate_keyed` reads no row.
-- name: rate_ctes
rate_keyed AS (
    -- The candidates' rate keys, locked in id order after every concurrency key, with the latest finish recorded here.
    -- `handed_over` is read in the rows the lock takes, so the outcome write runs before any
    -- rate key row is locked (as for `keyed`), and no run starts before a finish this
    -- statement records (the slot it hands over).
    SELECT k.id, k.name, k.rate_limit, k.per_seconds, k.starts,
           (SELECT max(finished_at) FROM recorded) AS handed_over
      FROM tasks_ratekey k
     WHERE k.id = ANY (ARRAY(SELECT DISTINCT rkey FROM candidates WHERE rkey IS NOT NULL))
       AND (SELECT count(*) FROM keyed) >= 0
     ORDER BY k.id
       FOR NO KEY UPDATE
), rate_room AS (
    -- Each locked rate key with its `now`, read after the lock, and its starts in the window.
    SELECT l.id, l.name, l.rate_limit, l.per_seconds, l.starts, l.now,
           (SELECT count(*) FROM unnest(l.starts) AS s(at)
             WHERE s.at > l.now - make_interval(secs => l.per_seconds)) AS used
      FROM (SELECT k.*, greatest(clock_timestamp(), k.handed_over) AS now
              FROM rate_keyed k) AS l
), rate_admission AS (
    -- Whether each rate-keyed candidate may start at its key's `now` (strict order in a key).
    SELECT id, rkey, execute_at, now, taken < rate_limit AND execute_at <= now AS admitted
      FROM (
    SELECT c.id, c.rkey, c.execute_at, k.now, k.rate_limit,
           k.used + c.tied + (
               SELECT count(*) FROM (
                   SELECT FROM tasks_run o
                    WHERE o.rate_key_id = c.rkey
                      AND o.status IN ('scheduled', 'waiting_for_resource')
                      AND o.priority > c.priority
                      AND o.execute_at <= k.now
                    LIMIT k.rate_limit) AS higher) + (
               SELECT count(*) FROM (
                   SELECT FROM tasks_run o
                    WHERE o.rate_key_id = c.rkey
                      AND o.status IN ('scheduled', 'waiting_for_resource')
                      AND o.priority = c.priority
                      AND o.execute_at < c.execute_at
                    LIMIT k.rate_limit) AS earlier) AS taken
      FROM (SELECT c.*, row_number() OVER (PARTITION BY c.rkey, c.priority, c.execute_at
                                           ORDER BY c.id) - 1 AS tied
              FROM candidates c
             WHERE c.rkey IS NOT NULL AND c.id NOT IN (SELECT id FROM missed)) AS c
      JOIN rate_room k ON k.id = c.rkey) AS ranked
)

-- The rate keys' logs once the claim has picked its runs (the second half of the rate limits,
-- after `picked`: a CTE refers only to those before it).
-- name: rate_log_ctes
rate_log AS (
    -- Each key's log once this claim's starts (all at `now`) are appended, trimmed to the last
    -- `rate_limit`; full, its oldest start plus the window is when the next run may start.
    SELECT id, name, rate_limit, per_seconds, started, starts,
           CASE WHEN cardinality(starts) >= rate_limit
                THEN starts[cardinality(starts) - rate_limit + 1]
                     + make_interval(secs => per_seconds) END AS held_until
      FROM (SELECT k.id, k.name, k.rate_limit, k.per_seconds, n.started,
                   (k.starts || array_fill(k.now, ARRAY[n.started]))[
                       greatest(1, cardinality(k.starts) + n.started - k.rate_limit + 1):]
                       AS starts
              FROM rate_room k
             CROSS JOIN LATERAL (
                   SELECT count(*)::int AS started
                     FROM rate_admission a JOIN picked p ON p.id = a.id
                    WHERE a.rkey = k.id) AS n) AS logged
)

-- What a batch's ends (`done`, `alerts`) and a claim's misses (`missed`) add up to, one CTE each
-- whichever statement made them: the statement without one has an empty stand-in (`no_finish`,
-- `no_claim`). A finished run is one with a `finished_at` (set iff terminal). In `claim_ctes`
-- (after the misses, before the key rows, which read their RETURNING: `key_ctes`) or after
-- `no_claim` in `record`.
-- name: outcome_ctes
completed AS (
    -- The tasks whose last occurrence just ended (finished or missed), completed (or failed).
    -- Nothing is left to plan or to run; `failed` when its last run failed (complete.sql). The
    -- snapshot still shows this batch's runs as running (begun: attempt > 0) and the missed
    -- ones as scheduled (never failed), hence the status from `done` and the exclusions. `done`
    -- is read as sets, each hashed once (IN), not joined again for every task's run.
    UPDATE tasks_task t
       SET status = CASE WHEN (SELECT o.id IN (SELECT id FROM done WHERE status = 'failed')
                                      OR (o.status = 'failed'
                                          AND o.id NOT IN (SELECT id FROM done))
                                 FROM tasks_run o
                                WHERE o.task_id = t.id
                                  AND (o.attempt > 0 OR o.finished_at IS NOT NULL
                                       OR o.id IN (SELECT id FROM missed))
                                ORDER BY o.scheduled_at DESC LIMIT 1)
                         THEN 'failed' ELSE 'completed' END,
           updated_at = clock_timestamp()
     WHERE t.id IN (SELECT task_id FROM done WHERE finished_at IS NOT NULL
                    UNION ALL
                    SELECT task_id FROM missed)
       AND t.status = 'active' AND t.next_unplanned_at IS NULL
       AND NOT EXISTS (
           SELECT 1 FROM tasks_run o
            WHERE o.task_id = t.id AND o.status IN ('scheduled', 'running', 'waiting_for_resource')
              AND o.id NOT IN (SELECT id FROM done WHERE finished_at IS NOT NULL)
              AND o.id NOT IN (SELECT id FROM missed))
    RETURNING t.id
), counted AS (
    -- /metrics counters (tasks/counters.py): attempts, finishes, alerts and misses, one upsert.
    -- Metrics `attempt`, `finished`, `alert` (scheduler_alerts_total) and `skipped` (reason
    -- misfire, scheduler_runs_skipped_total). A shard of the worker's own among the 32, from its
    -- name (the claim alone takes no shard parameter).
    INSERT INTO tasks_runcounter (metric, kind, outcome, shard, value)
    -- The kind of a batch's ends comes with them (`done`, `alerts`); a miss reads its task.
    SELECT c.metric, c.kind, c.outcome, hashtext(%(worker)s) & 31, count(*)
      FROM (SELECT 'attempt' AS metric, kind, outcome FROM done
            UNION ALL
            SELECT 'finished', kind, status FROM done WHERE finished_at IS NOT NULL
            UNION ALL
            SELECT 'alert', kind, event FROM alerts
            UNION ALL
            SELECT 'skipped', t.kind, 'misfire' FROM missed m JOIN tasks_task t ON t.id = m.task_id
           ) c
     GROUP BY c.metric, c.kind, c.outcome
     ORDER BY c.metric, c.kind, c.outcome
    ON CONFLICT (metric, kind, outcome, shard)
    DO UPDATE SET value = tasks_runcounter.value + EXCLUDED.value
    RETURNING metric
), notified AS (
    -- The outbox's events of the batch's ends (tasks/outbox.py), queued in one call.
    -- succeeded; a failed attempt that will be retried -> failed; the last attempt failed ->
    -- retries_exhausted; the health alerts. (A claim's misses queue theirs in misfire_ctes,
    -- which the claim itself makes run.) Only tasks that could notify at all reach
    -- notifications_enqueue: calling it costs more than the rest of the statement (PL/pgSQL
    -- plans its query on every call).
    SELECT notifications_enqueue(array_agg(id), array_agg(task_id), array_agg(attempt),
                                 array_agg(event), %(window)s, %(channel)s) AS queued
      FROM (SELECT d.id, d.task_id, d.attempt,
                   CASE WHEN d.status = 'succeeded' THEN 'succeeded'
                        WHEN d.status = 'failed' THEN 'retries_exhausted'
                        WHEN d.status = 'scheduled' AND d.outcome IN ('failed', 'timed_out')
                        THEN 'failed'
                   END AS event
              FROM done d
             WHERE d.task_notifies
                OR EXISTS (SELECT 1 FROM notifications_channel c
                            WHERE c.owner_id = d.task_owner_id AND c.all_tasks_events <> '{{}}')
            UNION ALL
            SELECT id, task_id, attempt, event FROM alerts) AS e
     WHERE event IS NOT NULL
    HAVING count(*) > 0
)

-- The claim's stand-ins for the outcome write's CTEs: it records nothing (`judged_written`:
-- `keyed` reads it).
-- name: no_finish
done AS (
    SELECT NULL::uuid AS id, NULL::uuid AS task_id, NULL::text AS status, NULL::int AS attempt,
           NULL::text AS outcome, NULL::timestamptz AS finished_at, NULL::text AS kind,
           NULL::integer AS task_owner_id, NULL::boolean AS task_notifies
     WHERE false
), recorded AS (
    SELECT NULL::uuid AS run_id, NULL::timestamptz AS finished_at WHERE false
), alerts AS (
    SELECT NULL::uuid AS id, NULL::uuid AS task_id, NULL::int AS attempt, NULL::text AS kind,
           NULL::text AS event
     WHERE false
), judged_written AS (
    SELECT NULL::uuid AS task_id WHERE false
)

-- The outcome write's stand-in for the claim's misses: it claims nothing.
-- name: no_claim
missed AS (SELECT NULL::uuid AS id, NULL::uuid AS task_id WHERE false)

-- `row` says what each row is: a claimed run, (once) that capacity held due runs back (the
-- worker then waits for a finish), (once) that rate limits did, and `rate_wait` seconds until
-- the first of them may start, or (once) that the claim passed over a key another claim held;
-- the claimed columns of those three rows are NULL.
-- name: claim
WITH {no_finish}, {claim_ctes(ARRAY[]::uuid[])}
SELECT 'claimed' AS row, claimed.*, NULL::float8 AS rate_wait FROM claimed
UNION ALL
SELECT 'held', claimed.*, NULL FROM {held_row}
UNION ALL
SELECT 'rate', claimed.*, rate_wait.seconds FROM {rate_row}
UNION ALL
SELECT 'passed', claimed.*, NULL FROM {passed_row}

-- One row when capacity or a full concurrency key held due runs back (LEFT JOIN ... ON false:
-- claimed's columns, NULL): the worker then waits for a run to end (its own, or a NOTIFY from
-- the statement that ends a run of a full key) instead of claiming again for runs it cannot
-- take. A key is full for runs this claim held back, and for due runs its scan skipped.
-- name: held_row
(SELECT) AS one LEFT JOIN claimed ON false
 WHERE EXISTS (SELECT FROM fitting WHERE NOT fits AND execute_at <= statement_timestamp())
    OR EXISTS (SELECT FROM key_admission WHERE NOT admitted AND execute_at <= statement_timestamp())
    OR EXISTS (SELECT FROM key_running kr JOIN tasks_concurrencykey k ON k.id = kr.key
                WHERE kr.running >= k.max_running
                  AND EXISTS (SELECT FROM tasks_run r
                               WHERE r.concurrency_key_id = kr.key
                                 AND r.status IN ('scheduled', 'waiting_for_resource')
                                 AND r.execute_at <= statement_timestamp()))

-- One row when the claim had slots free and passed over a candidate's concurrency key whose row
-- another claim held (`keyed`, SKIP LOCKED): that claim commits within milliseconds, so the
-- worker claims again after a short pause rather than its usual one.
-- name: passed_row
(SELECT) AS one LEFT JOIN claimed ON false
 WHERE (SELECT count(*) FROM picked) < %(limit)s
   AND EXISTS (SELECT FROM candidates c
                WHERE c.ckey IS NOT NULL AND c.ckey NOT IN (SELECT id FROM keyed))

-- One row when rate limits hold runs that come free at a known instant: `rate_wait` says in
-- how many seconds the worker should claim again (it sleeps no longer than that): the earliest
-- next start of a full key with due runs (held here, or skipped by the scan), or a rate-limited
-- candidate's due time (they are not claimed ahead of it). None: no row, and not asked when the
-- batch is full (the worker claims again when a slot frees).
-- name: rate_row
(SELECT extract(epoch FROM min(at) - clock_timestamp())::float8 AS seconds
   FROM (SELECT l.held_until AS at
           FROM rate_admission a JOIN rate_log l ON l.id = a.rkey
          WHERE NOT a.admitted AND a.execute_at <= a.now AND l.held_until > a.now
         UNION ALL
         SELECT execute_at FROM rate_admission WHERE NOT admitted AND execute_at > now
         UNION ALL
         SELECT k.held_until FROM tasks_ratekey k
          WHERE k.held_until > statement_timestamp()
            AND EXISTS (SELECT FROM tasks_run r
                         WHERE r.rate_key_id = k.id
                           AND r.status IN ('scheduled', 'waiting_for_resource')
                           AND r.execute_at <= statement_timestamp()
                                               + make_interval(secs => %(prefetch)s))) AS a
  WHERE (SELECT count(*) FROM picked) < %(limit)s) AS rate_wait
 LEFT JOIN claimed ON false WHERE rate_wait.seconds IS NOT NULL

-- The outcome write, as CTEs that a claim can follow in the same statement (see `cycle`).
-- name: finish_ctes
done AS (
    -- The finished runs the worker still holds (fenced), with their outcomes written.
    UPDATE tasks_run r
       SET status = v.status,
           finished_at = CASE WHEN v.status = ANY(%(terminal)s) THEN clock_timestamp() END,
           execute_at = CASE WHEN v.status = 'scheduled'
                             THEN clock_timestamp() + make_interval(secs => v.retry_in)
                             ELSE r.execute_at END,
           worker = CASE WHEN v.status = 'scheduled' THEN '' ELSE r.worker END,
           heartbeat_at = CASE WHEN v.status = 'scheduled' THEN NULL ELSE r.heartbeat_at END,
           -- A rate-limited run keeps the start its key admitted (its log's entry).
           started_at = CASE WHEN r.rate_key_id IS NULL THEN coalesce(v.started_at, r.started_at)
                             ELSE r.started_at END,
           error = v.error, output = v.output, exit_code = v.exit_code,
           http_status = v.http_status
      FROM unnest(%(ids)s::uuid[], %(attempts)s::int[], %(statuses)s::text[],
                  %(retry_in)s::float8[], %(started)s::timestamptz[], %(errors)s::text[],
                  %(outputs)s::text[], %(exit_codes)s::int[], %(http_statuses)s::int[],
                  %(outcomes)s::text[])
           AS v(id, attempt, status, retry_in, started_at, error, output, exit_code, http_status,
                outcome),
           tasks_task t
     WHERE r.id = v.id AND r.attempt = v.attempt AND r.worker = %(worker)s AND t.id = r.task_id
       -- The fence's status as no index's condition (`IS TRUE`): read through run_running_idx,
       -- the worker's running runs (estimated one) drove the generic plan, and the outcomes'
       -- arrays were unnested again for each of them (n x n rows a cycle); so the outcomes
       -- drive it, each a probe of the primary key (bench/NOTEBOOK.md,
       -- "The outcome write driven by the outcomes").
       AND (r.status = 'running') IS TRUE
    -- The task's columns that `counted` and `notified` need, read here once per run: each of
    -- them joining tasks_task again read the task's row two more times per run.
    RETURNING r.id, r.task_id, r.status, v.attempt, v.outcome, r.scheduled_at, r.started_at,
              r.finished_at, v.started_at AS attempt_started_at, v.error AS attempt_error,
              v.exit_code, v.http_status, r.concurrency_key_id AS ckey, t.kind,
              t.owner_id AS task_owner_id,
              jsonb_typeof(t.notify) = 'array' AND t.notify <> '[]'::jsonb AS task_notifies
), recorded AS (
    -- Each finished attempt's row; its `finished_at` bounds the starts a cycle claims after it.
    INSERT INTO tasks_attempt (run_id, number, worker, started_at, finished_at, outcome, error,
                               exit_code, http_status)
    SELECT d.id, d.attempt, %(worker)s, d.attempt_started_at, clock_timestamp(), d.outcome,
           d.attempt_error, d.exit_code, d.http_status
      FROM done d
    RETURNING run_id, finished_at
), {judge_ctes}

-- A task's expectations judged on the outcomes of `done` (tasks/expectations.py, which explains
-- the health states): `failing` after failure_streak final failures in a row, `recovered` at
-- the first success after that or after any other alert of health, `too_fast` for a success
-- under duration.min; a reminder when repeat_every has passed since the last alert. Only tasks
-- with a health row take part: for the others it is one probe of that table's primary key per
-- batch (= ANY of an array, an index scan whatever the planner thinks of the CTE's size). The
-- rows are locked: two workers finishing runs of one task judge one after the other, each on
-- the state the other left. Of one task's runs in one batch, the latest scheduled is judged.
-- name: judge_ctes
judged AS (
    -- Each judged task's health row (locked) with the health this batch's latest outcome gives.
    SELECT j.*,
           CASE WHEN j.status = 'succeeded' THEN 'up'
                WHEN j.failure_streak IS NOT NULL AND j.failures_after >= j.failure_streak
                THEN 'failing' ELSE j.health END AS health_after
      FROM (SELECT DISTINCT ON (d.task_id) d.id, d.task_id, d.attempt, d.status, d.kind,
                   d.finished_at - d.started_at AS took, l.health, l.failure_streak,
                   l.min_duration, l.repeat_every, l.alerted_at,
                   CASE WHEN d.status = 'succeeded' THEN 0 ELSE l.failures + 1 END
                       AS failures_after
              FROM done d
              JOIN (SELECT h.task_id, h.health, h.failures, h.failure_streak, h.min_duration,
                           h.repeat_every, h.alerted_at
                      FROM tasks_taskhealth h
                     WHERE h.task_id = ANY(ARRAY(SELECT task_id FROM done
                                                  WHERE status IN ('succeeded', 'failed')))
                       FOR UPDATE) AS l ON l.task_id = d.task_id
             WHERE d.status IN ('succeeded', 'failed')
             ORDER BY d.task_id, d.scheduled_at DESC) AS j
), alerts AS (
    -- The alerts the new health raises: a change, a reminder, or a success too fast.
    SELECT id, task_id, attempt, kind,
           CASE WHEN health_after = 'up' THEN 'recovered' ELSE health_after END AS event
      FROM judged
     WHERE health_after <> health
        OR (health_after <> 'up' AND repeat_every IS NOT NULL
            AND (alerted_at IS NULL
                 OR alerted_at <= clock_timestamp() - make_interval(secs => repeat_every)))
    UNION ALL
    SELECT id, task_id, attempt, kind, 'too_fast' FROM judged
     WHERE status = 'succeeded' AND took < make_interval(secs => min_duration)
), judged_written AS (
    -- The new health, streak and alert times, on the rows `judged` locked.
    UPDATE tasks_taskhealth h
       SET health = j.health_after, failures = j.failures_after,
           succeeded_at = CASE WHEN j.status = 'succeeded' THEN clock_timestamp()
                               ELSE h.succeeded_at END,
           changed_at = CASE WHEN j.health_after <> j.health THEN clock_timestamp()
                             ELSE h.changed_at END,
           alerted_at = CASE WHEN j.id IN (SELECT id FROM alerts WHERE event <> 'too_fast')
                             THEN clock_timestamp() ELSE h.alerted_at END
      FROM judged j
     WHERE h.task_id = j.task_id
    RETURNING h.task_id
)

-- Referencing the SELECT-only CTEs makes PostgreSQL evaluate them (it skips unreferenced ones).
-- name: record
WITH {finish_ctes}, {no_claim}, {outcome_ctes}
SELECT {recorded_columns} FROM done

-- A recorded run; `notified` makes PostgreSQL evaluate that SELECT-only CTE, and `woke` wakes
-- sleeping workers on commit (one NOTIFY) when a retry is due now or a run of a key that was
-- full ended (the workers it held wait for that: `held_row`).
-- name: recorded_columns
done.id AS recorded_id, done.task_id AS recorded_task_id, done.status AS recorded_status,
(SELECT count(*) FROM (
     SELECT pg_notify('scheduler_run_due', '') FROM done d
      WHERE d.status = 'scheduled'
         OR d.ckey IN (SELECT k.id FROM tasks_concurrencykey k
                        WHERE k.id IN (SELECT ckey FROM done)
                          AND (SELECT count(*) FROM (
                                   SELECT FROM tasks_run r
                                    WHERE r.concurrency_key_id = k.id AND r.status = 'running'
                                    LIMIT k.max_running) AS n) >= k.max_running)
      LIMIT 1) AS w) AS woke,
(SELECT queued FROM notified) AS notified

-- One round trip per worker cycle: record the finished batch and claim the freed slots. The two
-- UPDATEs touch disjoint rows (the finished runs are `running`, the claim takes `scheduled`
-- ones), and in autocommit the statement is its own transaction: one commit per cycle. The
-- claimed rows come first: the candidates' scan runs before the outcome write (`candidates`),
-- which runs, with what its outcomes add up to, before any key row is locked (`keyed`,
-- `rate_keyed`).
-- name: cycle
WITH {finish_ctes}, {claim_ctes(%(ids)s::uuid[])}
SELECT 'claimed' AS row, NULL::uuid AS recorded_id, NULL::uuid AS recorded_task_id,
       NULL::text AS recorded_status, NULL::bigint AS woke, NULL::int AS notified, claimed.*,
       NULL::float8 AS rate_wait
  FROM claimed
UNION ALL
SELECT 'recorded', {recorded_columns}, claimed.*, NULL FROM done LEFT JOIN claimed ON false
UNION ALL
SELECT 'held', NULL, NULL, NULL, NULL, NULL, claimed.*, NULL FROM {held_row}
UNION ALL
SELECT 'rate', NULL, NULL, NULL, NULL, NULL, claimed.*, rate_wait.seconds FROM {rate_row}
UNION ALL
SELECT 'passed', NULL, NULL, NULL, NULL, NULL, claimed.*, NULL FROM {passed_row}

-- One statement per worker process, however many runs it holds; a run missing from the answer
-- was cancelled or taken back by the reviewer. Only the runs the worker names are renewed.
-- name: renew_heartbeats
UPDATE tasks_run SET heartbeat_at = clock_timestamp()
 WHERE id = ANY(%s) AND worker = %s AND status = 'running' RETURNING id

-- Since when the queue's oldest due run has waited (/health's queue check): the first entry of
-- run_claimable_idx for each priority, and the first not backfilled; a backfilled run waits
-- from its backfill (created_at), not from the past occurrence it records (execute_at).
-- name: due_waiting_since
SELECT least(
       (SELECT min(greatest(first.execute_at, first.created_at))
          FROM generate_series(0, 9) AS p(priority)
         CROSS JOIN LATERAL (
               SELECT execute_at, created_at FROM tasks_run
                WHERE status IN ('scheduled', 'waiting_for_resource') AND priority = p.priority
                ORDER BY execute_at LIMIT 1) AS first),
       (SELECT min(first.execute_at) FROM generate_series(0, 9) AS p(priority)
         CROSS JOIN LATERAL (
               SELECT execute_at FROM tasks_run
                WHERE status IN ('scheduled', 'waiting_for_resource') AND priority = p.priority
                  AND NOT backfill
                ORDER BY execute_at LIMIT 1) AS first))

-- How long a worker may sleep: the earliest claimable run it could hold at all (within its
-- totals, executables only with a sandbox: {executables} written in, as in the claim, so the
-- generic plan is kept), due later than %(later_than)s seconds from now (-1e9: any) and not
-- before the worker's claim floor %(since)s (NULL: none). Then the database clock, read last: a
-- worker learns from it where its own clock stands (tasks/db.py, `DatabaseClock`).
-- name: seconds_until_next_due
SELECT extract(epoch FROM min(first.execute_at) - clock_timestamp())::float8, clock_timestamp()
  FROM generate_series(0, 9) AS p(priority)
 CROSS JOIN LATERAL (
       SELECT execute_at FROM tasks_run
        WHERE status IN ('scheduled', 'waiting_for_resource') AND priority = p.priority
          AND execute_at > statement_timestamp() + make_interval(secs => %(later_than)s)
          AND execute_at >= coalesce(%(since)s::timestamptz, '-infinity')
          AND cpu_millis <= %(cpu_total)s AND memory_bytes <= %(memory_total)s
          AND ({executables} = 1
               OR (SELECT t.kind FROM tasks_task t
                    WHERE t.id = tasks_run.task_id) <> 'executable')
        ORDER BY execute_at LIMIT 1) AS first

-- A worker's claim floor: the earliest claimable run it could hold at all (the filters of
-- seconds_until_next_due), or now when there is none, less %(margin)s seconds. The worker's
-- claims read run_claimable_idx from there (`since`), and it finds the floor again every
-- second or so (tasks/worker/worker.py): while a transaction holds an old snapshot, vacuum
-- removes no index entry of a run claimed since, nor does a scan mark one dead, and a claim
-- that read each priority's range from its first entry read them all (bench/NOTEBOOK.md,
-- "Pickup while an old snapshot holds back vacuum"). The margin covers runs committed a
-- little after the instant they are due; a run that becomes claimable further behind the floor
-- (rescued, backfilled, retried now) waits for the next floor: at most a second old, plus an idle worker's poll interval.
-- name: claim_floor
SELECT least(min(first.execute_at), statement_timestamp()) - make_interval(secs => %(margin)s)
  FROM generate_series(0, 9) AS p(priority)
  LEFT JOIN LATERAL (
       SELECT execute_at FROM tasks_run
        WHERE status IN ('scheduled', 'waiting_for_resource') AND priority = p.priority
          AND cpu_millis <= %(cpu_total)s AND memory_bytes <= %(memory_total)s
          AND ({executables} = 1
               OR (SELECT t.kind FROM tasks_task t
                    WHERE t.id = tasks_run.task_id) <> 'executable')
        ORDER BY execute_at LIMIT 1) AS first ON true

-- The pages of tasks_run and tasks_task now, the sizes the planner reads (with their statistics)
-- when it plans: a worker plans its prepared statements again when one has grown or shrunk by a
-- quarter since they were planned (tasks/worker/worker.py, `plans_sized`).
-- name: table_pages
SELECT pg_relation_size('tasks_run'::regclass) / current_setting('block_size')::int8,
       pg_relation_size('tasks_task'::regclass) / current_setting('block_size')::int8
