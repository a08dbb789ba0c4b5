-- The API's reads as JSON written by PostgreSQL (tasks/api/json_sql.py): a task, a page of
-- tasks, a run, a page of runs. Each read is a statement by ids (`*_by_ids`, no count) or a
-- list page (`*_page`: the list's ORM query of ids and of its count written in, `-- query:`).
-- Rows are read by column name. The literals are the lengths of a task's lists
-- (tasks/history.py RECENT_RUNS, json_sql.NEXT_RUNS) and their sum, the runs one scan reads.
-- literal: recent_runs
-- literal: next_runs
-- literal: scanned
-- query: page
-- query: counted

-- A time as DRF's DateTimeField writes it (time zone UTC): ISO 8601, microseconds only when not
-- zero, "Z". Formatted by PostgreSQL: parsing and re-formatting thousands of timestamps per
-- page in Python took most of a list request's time. One to_char and a replace: the cheapest
-- exact form measured (a CASE with two to_char calls took half as long again; PostgreSQL's own
-- JSON timestamps drop trailing zeros, ".0012" for ".001200"). A test holds it equal to DRF's.
-- name: iso_time(at)
replace(to_char({at} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), '.000000Z', 'Z')

-- A run's idempotency key, as tasks/ids.py idempotency_key writes it (a test holds the two
-- equal): its task and its nominal time in microseconds.
-- name: idempotency_key(task_id, scheduled_at)
{task_id} || ':' || to_char({scheduled_at} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')

-- The FROM item of a read by ids: the ids as an array parameter, in their order.
-- name: page_of_ids
unnest(%(ids)s::uuid[]) WITH ORDINALITY AS page(id, position)

-- The FROM item of a list page: the list's query of (id, position), numbered by its ordering,
-- and the page's slice as parameters (not literals, as Django writes them): every page of a
-- list is one prepared statement per connection, not one per page number, each planned on its
-- first read (a few ms for these statements). The page's ids need no round trip of their own.
-- name: page_of_list
({page} LIMIT %(page_limit)s OFFSET %(page_offset)s) AS page(id, position)

-- How many rows the whole filtered list has, counted by the statement that writes its page, in
-- the same snapshot: a list page costs one round trip, not a count and then the page.
-- name: count_of_list
(SELECT count(*) FROM ({counted}) AS counted)

-- A task's runs (tasks/history.py): runs planned ahead, not begun, due at `now` or later.
-- name: upcoming
(status = ANY(%(claimable)s) AND attempt = 0 AND scheduled_at >= %(now)s)

-- A run's summary (RunSummarySerializer) as a task's `runs` shows it: kept on the finished run
-- by the database (run_summary.sql), written by the same function as it is read otherwise.
-- name: summary
coalesce(summary, tasks_run_summary(id, scheduled_at, status, attempt, started_at, finished_at))

-- A task's `runs` are its latest runs that are not among its next_runs (begun, or due and
-- waiting for a worker), newest first; its occurrences planned ahead (`upcoming`) are listed
-- first in next_runs, with their ids in next_runs_detail. Both come from one backward scan of
-- the (task_id, scheduled_at) unique index over the task's newest `scanned` runs, however long
-- its history is (a window over the whole history would read it all); a page carries 50 of
-- these scans. Only a task with more than `next_runs` runs ahead needs more: the history
-- (`history_of_task`) when too few of those scanned are history, the runs ahead
-- (`runs_ahead_of_task`) when none of them is past `now`. (A probe of its own for each task's
-- runs ahead was a quarter of the tasks' part of the statement; numbering the rows with window
-- functions cost more than the scan.) Every aggregate states its order: PostgreSQL does not
-- promise the subquery's to an aggregate (16 and later presort an aggregate's input by its own
-- ORDER BY, and took a task's runs oldest first). All of them state the same one, which 16 and
-- later read as the scan gives it, without a sort. The runs ahead come newest first (next_runs
-- sorts them).
-- name: recent_runs_of_task
SELECT '[' || coalesce(array_to_string((array_agg(r.shown ORDER BY r.scheduled_at DESC)
                                        FILTER (WHERE r.shown IS NOT NULL))[:{recent_runs}],
                                       ','), '') || ']' AS runs,
       count(r.shown) AS shown,
       array_agg(r.scheduled_at ORDER BY r.scheduled_at DESC) FILTER (WHERE r.shown IS NULL)
           AS ahead_times,
       array_agg(r.id ORDER BY r.scheduled_at DESC) FILTER (WHERE r.shown IS NULL) AS ahead_ids,
       count(*) < {scanned} AS whole,
       count(*) < {scanned} OR bool_or(r.scheduled_at < %(now)s) AS sees_ahead
  FROM (SELECT id, scheduled_at, CASE WHEN NOT {upcoming} THEN {summary} END AS shown
          FROM tasks_run
         WHERE task_id = t.id
         ORDER BY scheduled_at DESC LIMIT {scanned}) AS r

-- A task's history when the scan saw too little of it: its latest `recent_runs` runs that are
-- not upcoming, as a JSON array.
-- name: history_of_task
(
SELECT '[' || coalesce(string_agg(r.shown, ',' ORDER BY r.scheduled_at DESC), '') || ']'
  FROM (SELECT scheduled_at, {summary} AS shown
          FROM tasks_run
         WHERE task_id = t.id AND NOT {upcoming}
         ORDER BY scheduled_at DESC LIMIT {recent_runs}) AS r)

-- A task's last run: the latest that happened (tasks/history.py's HAPPENED: begun, or ended
-- without starting once its time had come), looked for further back than the scan.
-- name: last_run_of_task
(
SELECT {summary}
  FROM tasks_run
 WHERE task_id = t.id
   AND (attempt > 0 OR (finished_at IS NOT NULL AND scheduled_at <= %(now)s))
 ORDER BY task_id DESC, scheduled_at DESC LIMIT 1)

-- The earliest runs ahead of an active task the scan did not see past: the index read forward
-- from `now`. Its conditions on `t` and `recent` are one-time filters: other tasks read nothing.
-- Ordered as the (task_id, scheduled_at) index is: by `scheduled_at` alone, the planner took
-- run_scheduled_at_idx and read every task's runs ahead for each task.
-- name: runs_ahead_of_task
SELECT array_agg(p.scheduled_at ORDER BY p.scheduled_at) AS times,
       array_agg(p.id ORDER BY p.scheduled_at) AS ids
  FROM (SELECT id, scheduled_at FROM tasks_run
         WHERE task_id = t.id AND t.status = 'active' AND NOT recent.sees_ahead
           AND {upcoming}
         ORDER BY task_id, scheduled_at LIMIT {next_runs}) AS p

-- A task's columns: TaskOutputSerializer's fields in its order, in two parts (`head`, `tail`);
-- what is computed in Python (`describe`, `last_run` from the runs read here, `next_run_at`,
-- `next_runs`, `next_runs_detail`, `calendar_url`) goes between them. The other columns are
-- what those need.
-- name: task_columns
json_build_object(
           'id', t.id,
           'owner', CASE WHEN t.owner_id = %(owner)s THEN %(owner_name)s::text
                         ELSE (SELECT u.username FROM auth_user u WHERE u.id = t.owner_id) END,
           'name', t.name, 'dedup_key', t.dedup_key,
           'kind', t.kind, 'payload', t.payload,
           'executable', CASE WHEN t.executable <> '' THEN t.executable_name END,
           -- A recurring schedule shows the misfire grace that applies (shown_schedule in
           -- tasks/occurrences.py).
           'schedule', CASE WHEN t.schedule->>'type' = 'once'
                              OR coalesce(t.schedule->'misfire_grace', 'null') <> 'null'
                            THEN t.schedule
                            ELSE t.schedule || jsonb_build_object('misfire_grace', %(grace)s)
                            END,
           'priority', t.priority, 'max_attempts', t.max_attempts,
           'retry_backoff', json_build_object('base', t.retry_backoff_base,
                                              'cap', t.retry_backoff_cap),
           'timeout', t.timeout, 'notify', t.notify, 'resources', t.resources,
           'concurrency', CASE WHEN t.concurrency = '{{}}' THEN NULL ELSE t.concurrency END,
           'rate_limit', CASE WHEN t.rate_limit = '{{}}' THEN NULL ELSE t.rate_limit END,
           'on_zombie', t.on_zombie, 'expect', t.expect, 'status', t.status,
           'health', coalesce((SELECT h.health FROM tasks_taskhealth h WHERE h.task_id = t.id),
                              'up'),
           'taskset', (SELECT name FROM tasks_taskset WHERE id = t.taskset_id),
           'key', t.taskset_key,
           'team', (SELECT s.slug FROM accounts_team s WHERE s.id = t.team_id))::text AS head,
       '{{"runs":'
           || CASE WHEN recent.whole OR recent.shown >= {recent_runs} THEN recent.runs
                   ELSE {history_of_task} END
           || ',"created_at":"' || {iso_time(t.created_at)}
           || '","updated_at":"' || {iso_time(t.updated_at)} || '"}}' AS tail,
       t.status, t.schedule::text AS schedule, t.next_unplanned_at::text AS cursor,
       t.runs_planned,
       CASE WHEN recent.sees_ahead THEN recent.ahead_times ELSE ahead.times END AS ahead_times,
       CASE WHEN recent.sees_ahead THEN recent.ahead_ids ELSE ahead.ids END AS ahead_ids,
       {last_run_of_task} AS last_run,
       t.id,
       -- The owner's calendar feed token (`calendar_url`): read once for the whole page.
       (SELECT f.token FROM tasks_calendarfeed f WHERE f.owner_id = %(owner)s) AS feed_token

-- A task the caller may see (accounts/access.py `visible`): their own without a team, and
-- every task of their teams.
-- name: visible_task
((t.owner_id = %(owner)s AND t.team_id IS NULL)
 OR t.team_id IN (SELECT m.team_id FROM accounts_membership m WHERE m.user_id = %(owner)s))

-- The FROM item of the task list's page in its default order (newest first, then id; no filter)
-- of what the caller sees (`visible_task`): the first `page_high` (the page's offset plus its
-- size) of their own tasks without a team, and as many of each of their teams' (a LATERAL over
-- their memberships, read here: no round trip of their own), then the page among those. Each
-- part is one ordered range of an index that leads with its condition
-- (task_owner_created_id_idx, index only, its included team_id skipping the owner's team
-- tasks; task_team_created_id_idx), merged in order; the OR of the two conditions was a bitmap
-- read of every visible row, sorted whole (bench/NOTEBOOK.md,
-- "A team member's task list in one statement"). The statement's text is the same for any
-- number of teams, so it is prepared once per connection. The list with a filter or another
-- order is the ORM's query (`page_of_list`), read part by part (accounts/access.py
-- `visible_page`).
-- name: visible_page_of_list
(SELECT id, row_number() OVER (ORDER BY created_at DESC, id) AS position
   FROM ((SELECT id, created_at FROM tasks_task
           WHERE owner_id = %(owner)s AND team_id IS NULL
           ORDER BY created_at DESC, id LIMIT %(page_high)s)
         UNION ALL
         (SELECT part.id, part.created_at
            FROM accounts_membership m
           CROSS JOIN LATERAL (SELECT id, created_at FROM tasks_task
                                WHERE team_id = m.team_id
                                ORDER BY created_at DESC, id LIMIT %(page_high)s) AS part
           WHERE m.user_id = %(owner)s)) AS firsts
  ORDER BY created_at DESC, id LIMIT %(page_limit)s OFFSET %(page_offset)s) AS page(id, position)

-- How many tasks the caller sees: the sums of the kept counts (task_counts.sql) of their own
-- tasks without a team and of each of their teams', read by the one index of tasks_taskcount
-- (team_id, owner_id, shard): at most 32 rows a key, however many tasks. Counting the rows was
-- most of the statement's time at 30,000 tasks of one owner (13-18 ms of 17-22 ms, a page of
-- 50), read from the table whenever the tasks had been updated since their last vacuum.
-- name: visible_count_of_list
((SELECT coalesce(sum(c.value), 0) FROM tasks_taskcount c
   WHERE c.team_id IS NULL AND c.owner_id = %(owner)s)
 + (SELECT coalesce(sum(c.value), 0) FROM accounts_membership m
      JOIN tasks_taskcount c ON c.team_id = m.team_id AND c.owner_id IS NULL
     WHERE m.user_id = %(owner)s))::bigint

-- The caller's tasks of a page, with their runs, in the page's order. Each task is read by its
-- key (the LIMIT keeps the planner from flattening the LATERAL into a join): the API's generic
-- plan takes a parameter LIMIT for a tenth of the rows, and with fresh statistics of 30,000
-- tasks it joined the page's 50 ids by hashing the whole table, 16 ms of an 18 ms page.
-- name: task_rows
 CROSS JOIN LATERAL (SELECT * FROM tasks_task WHERE id = page.id LIMIT 1) AS t
 CROSS JOIN LATERAL ({recent_runs_of_task}) AS recent
 CROSS JOIN LATERAL ({runs_ahead_of_task}) AS ahead
 WHERE {visible_task}
 ORDER BY page.position

-- The owner's tasks among the ids, in their order.
-- name: tasks_by_ids
SELECT {task_columns}, NULL::bigint AS total
  FROM {page_of_ids}
{task_rows}

-- A list page of the owner's tasks, and how many the whole list has.
-- name: tasks_page
SELECT {task_columns}, {count_of_list} AS total
  FROM {page_of_list}
{task_rows}

-- A page of the task list in its default order without a filter, and how many tasks the caller
-- sees: `tasks_page` with the list's parts written here instead of by the ORM.
-- name: tasks_visible_page
SELECT {task_columns}, {visible_count_of_list} AS total
  FROM {visible_page_of_list}
{task_rows}

-- A run's attempts (AttemptSerializer), by number, as a JSON array.
-- name: attempts_of_run
SELECT coalesce(json_agg(json_build_object(
           'number', a.number, 'started', {iso_time(a.started_at)},
           'finished', {iso_time(a.finished_at)}, 'outcome', a.outcome, 'error', a.error,
           'worker', a.worker, 'exit_code', a.exit_code, 'http_status', a.http_status)
           ORDER BY a.number), '[]')
  FROM tasks_attempt a WHERE a.run_id = r.id

-- A run as JSON text: RunSerializer's fields, in its order.
-- name: run_json
json_build_object(
           'id', r.id, 'task', r.task_id, 'scheduled_at', {iso_time(r.scheduled_at)},
           'execute_at', {iso_time(r.execute_at)}, 'status', r.status,
           -- The reason of the current wait only: a run cancelled or skipped while it
           -- waited keeps its last reason in the row, not in the API.
           'wait_reason', CASE WHEN r.status = 'waiting_for_resource' THEN r.wait_reason
                               ELSE '' END,
           'attempt', r.attempt,
           'max_attempts', r.max_attempts, 'priority', r.priority, 'worker', r.worker,
           'started_at', {iso_time(r.started_at)}, 'finished_at', {iso_time(r.finished_at)},
           'attempts', ({attempts_of_run}), 'exit_code', r.exit_code,
           'http_status', r.http_status, 'output', r.output, 'error', r.error,
           'zombie', r.zombie_since IS NOT NULL, 'zombie_since', {iso_time(r.zombie_since)},
           'idempotency_key', {idempotency_key(r.task_id, r.scheduled_at)},
           'backfill', r.backfill
       )::text

-- The owner's runs among the ids, in their order.
-- name: runs_by_ids
SELECT {run_json} AS run, NULL::bigint AS total
  FROM {page_of_ids}
  JOIN tasks_run r ON r.id = page.id
  JOIN tasks_task t ON t.id = r.task_id
 WHERE {visible_task}
 ORDER BY page.position

-- A list page of the owner's runs, and how many the whole list has.
-- name: runs_page
SELECT {run_json} AS run, {count_of_list} AS total
  FROM {page_of_list}
  JOIN tasks_run r ON r.id = page.id
  JOIN tasks_task t ON t.id = r.task_id
 WHERE {visible_task}
 ORDER BY page.position
