"""Every read of the task API (a task, a page of tasks, a run, a task's runs) as JSON built by
PostgreSQL: the one place the output shape is written.

A task list page carries 50 tasks with 20 run summaries each, a task's runs page 20 runs with
their attempts. Loading them as models, parsing every timestamp and formatting it again took
most of those requests' time; PostgreSQL writes the same JSON in a fraction of it, and the
response renderer (ORJSONRenderer) writes it as it is. The serializers describe this
shape in the OpenAPI schema; tests hold every served response to that schema
(tests/tasks/api/test_json_sql_schema_conformance.py) and these statements to DRF's formats
(tests/tasks/api/test_json_sql.py).

Only a task's next fire times (`next_run_at`, `next_runs`, `next_runs_detail`) are computed in
Python: the schedule's fire times come from the same code the scheduler plans with
(tasks/schedules.py), and are written into the task's JSON text. So is `calendar_url`, from the
owner's feed token the statement reads once per page and the route Django reverses.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import orjson
from django.conf import settings
from django.core.exceptions import EmptyResultSet
from django.db import router
from django.db.models import F, Model, QuerySet, Window
from django.db.models.functions import RowNumber

from scheduler_project.web.renderers import RawJSON
from tasks import feed_tokens, history, occurrences
from tasks.api.calendar_feed import task_feed_url
from tasks.db import prepared_cursor
from tasks.ids import idempotency_key_sql
from tasks.models import CLAIMABLE_STATUSES, Run, Task
from tasks.schedule_describe import describe

Ids = Sequence[UUID] | QuerySet
RECENT_RUNS = history.RECENT_RUNS  # a task's `runs`: its latest 20 begun runs
NEXT_RUNS = 5  # a task's `next_runs` (docs/api.md: up to the next 5 fire times)


def iso_sql(column: str) -> str:
    """`column` as DRF's DateTimeField writes it (time zone UTC): ISO 8601, microseconds only
    when not zero, "Z". Formatted by PostgreSQL: parsing and re-formatting thousands of
    timestamps per page in Python took most of a list request's time. One to_char and a
    replace: the cheapest exact form measured (a CASE with two to_char calls took half as long
    again; PostgreSQL's own JSON timestamps drop trailing zeros, ".0012" for ".001200")."""
    return (
        f"replace(to_char({column} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'),"
        " '.000000Z', 'Z')"
    )


def iso_json(times: list[datetime]) -> str:
    """`times` as a JSON array of what iso_sql writes, for the few times computed in Python (a
    task's next fire times, a schedule preview): orjson's RFC 3339 in UTC is that format (a test
    holds both equal to DRF's DateTimeField), at a tenth of the cost of DRF's field."""
    return orjson.dumps([at.astimezone(UTC) for at in times], option=orjson.OPT_UTC_Z).decode()


# A task's `runs` (RunSummarySerializer) are its latest 20 runs that are not among its next_runs
# (tasks/history.py: begun, or due and waiting for a worker), newest first; its occurrences
# planned ahead (not begun, due at `now` or later: `upcoming`) are listed first in next_runs,
# with their ids in next_runs_detail. Both come from one backward scan of the (task_id,
# scheduled_at) unique index over the task's newest 25 runs, however long its history is (a
# window over the whole history would read it all); a page carries 50 of these scans. Only a
# task with more than 5 runs ahead needs more: the history (`_HISTORY_SQL`) when fewer than 20
# of the 25 are history, the runs ahead (`_AHEAD_SQL`) when none of the 25 is past `now`. (A
# probe of its own for each task's runs ahead was a quarter of the tasks' part of the statement;
# numbering the rows with window functions cost more than the scan.)
# A finished run's JSON is kept on the run by the database (tasks/sql/run_summary.sql); the
# others are written by the same function as they are read. Every aggregate states its order:
# PostgreSQL does not promise the subquery's to an aggregate (16 and later presort an
# aggregate's input by its own ORDER BY, and took a task's runs oldest first). All of them state
# the same one, which 16 and later read as the scan gives it, without a sort. `last_run` is the
# first begun one, looked for further back only when the 25 hold none; the runs ahead come
# newest first (next_runs sorts them).
_SCANNED = RECENT_RUNS + NEXT_RUNS
_UPCOMING = "(status = ANY(%(claimable)s) AND attempt = 0 AND scheduled_at >= %(now)s)"
_SUMMARY = """coalesce(summary, tasks_run_summary(id, scheduled_at, status, attempt, started_at,
                                                  finished_at))"""

_RECENT_RUNS_SQL = f"""
SELECT '[' || coalesce(array_to_string((array_agg(r.shown ORDER BY r.scheduled_at DESC)
                                        FILTER (WHERE r.shown IS NOT NULL))[:{RECENT_RUNS}],
                                       ','), '') || ']' AS runs,
       count(r.shown) AS shown,
       array_agg(r.scheduled_at ORDER BY r.scheduled_at DESC) FILTER (WHERE r.shown IS NULL)
           AS ahead_times,
       array_agg(r.id ORDER BY r.scheduled_at DESC) FILTER (WHERE r.shown IS NULL) AS ahead_ids,
       count(*) < {_SCANNED} AS whole,
       count(*) < {_SCANNED} OR bool_or(r.scheduled_at < %(now)s) AS sees_ahead
  FROM (SELECT id, scheduled_at, CASE WHEN NOT {_UPCOMING} THEN {_SUMMARY} END AS shown
          FROM tasks_run
         WHERE task_id = t.id
         ORDER BY scheduled_at DESC LIMIT {_SCANNED}) AS r"""

_HISTORY_SQL = f"""(
SELECT '[' || coalesce(string_agg(r.shown, ',' ORDER BY r.scheduled_at DESC), '') || ']'
  FROM (SELECT scheduled_at, {_SUMMARY} AS shown
          FROM tasks_run
         WHERE task_id = t.id AND NOT {_UPCOMING}
         ORDER BY scheduled_at DESC LIMIT {RECENT_RUNS}) AS r)"""

_LAST_RUN_SQL = f"""(
SELECT {_SUMMARY}
  FROM tasks_run
 WHERE task_id = t.id
   AND (attempt > 0 OR (finished_at IS NOT NULL AND scheduled_at <= %(now)s))  -- HAPPENED
 ORDER BY task_id DESC, scheduled_at DESC LIMIT 1)"""

# The earliest runs ahead of an active task the scan did not see past: the index read forward
# from `now`. Its conditions on `t` and `recent` are one-time filters: other tasks read nothing.
# Ordered as the (task_id, scheduled_at) index is: by `scheduled_at` alone, the planner took
# run_scheduled_at_idx and read every task's runs ahead for each task.
_AHEAD_SQL = f"""
SELECT array_agg(p.scheduled_at ORDER BY p.scheduled_at) AS times,
       array_agg(p.id ORDER BY p.scheduled_at) AS ids
  FROM (SELECT id, scheduled_at FROM tasks_run
         WHERE task_id = t.id AND t.status = 'active' AND NOT recent.sees_ahead
           AND {_UPCOMING}
         ORDER BY task_id, scheduled_at LIMIT {NEXT_RUNS}) AS p"""

# TaskOutputSerializer's fields in its order, in two parts: what is computed in Python
# (`last_run` from the runs read here, `next_run_at`, `next_runs`, `next_runs_detail`,
# `calendar_url`) goes between them. The last columns are what those need.
_TASKS_SQL = f"""
SELECT json_build_object(
           'id', t.id, 'owner', %(owner_name)s::text, 'name', t.name, 'dedup_key', t.dedup_key,
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
           'key', t.taskset_key)::text,
       '{{"runs":'
           || CASE WHEN recent.whole OR recent.shown >= {RECENT_RUNS} THEN recent.runs
                   ELSE {_HISTORY_SQL} END
           || ',"created_at":"' || {iso_sql("t.created_at")}
           || '","updated_at":"' || {iso_sql("t.updated_at")} || '"}}',
       t.status, t.schedule::text, t.next_unplanned_at::text, t.runs_planned,
       CASE WHEN recent.sees_ahead THEN recent.ahead_times ELSE ahead.times END,
       CASE WHEN recent.sees_ahead THEN recent.ahead_ids ELSE ahead.ids END,
       {_LAST_RUN_SQL},
       t.id,
       -- The owner's calendar feed token (`calendar_url`): read once for the whole page.
       (SELECT f.token FROM tasks_calendarfeed f WHERE f.owner_id = %(owner)s),
       {{total}}
  FROM {{page}}
  JOIN tasks_task t ON t.id = page.id
 CROSS JOIN LATERAL ({_RECENT_RUNS_SQL}) AS recent
 CROSS JOIN LATERAL ({_AHEAD_SQL}) AS ahead
 WHERE t.owner_id = %(owner)s
 ORDER BY page.position
"""


def _next_json(times: Sequence[datetime], ids: dict[datetime, UUID]) -> str:
    """`next_run_at`, `next_runs` and `next_runs_detail` as the members of the task's JSON:
    the fire times, the first of them, and each with its run's id once it is planned."""
    utc = [at.astimezone(UTC) for at in times]
    detail = [{"scheduled_at": at, "run_id": ids.get(at)} for at in utc]
    first = orjson.dumps(utc[0] if utc else None, option=orjson.OPT_UTC_Z).decode()
    shown = orjson.dumps(utc, option=orjson.OPT_UTC_Z).decode()
    listed = orjson.dumps(detail, option=orjson.OPT_UTC_Z).decode()
    return f'"next_run_at": {first}, "next_runs": {shown}, "next_runs_detail": {listed}'


@functools.lru_cache(maxsize=8192)
def _upcoming(schedule: str, cursor: str, runs_planned: int) -> tuple[tuple[datetime, ...], str]:
    """A task's upcoming fire times (occurrences.upcoming_times) and their members of its JSON (as
    `_next_json` writes them with nothing planned), by its schedule and planner's cursor
    (`next_unplanned_at`) as PostgreSQL writes them (jsonb and timestamptz as text: canonical).
    They change only when the task is planned or edited, and tasks are read far more often than
    either: a list page read again computes none of its 50 tasks' times (they were a tenth of
    the page's time), and parses neither a schedule nor a time."""
    start = datetime.fromisoformat(cursor)
    times = occurrences.upcoming_times(orjson.loads(schedule), start, runs_planned, NEXT_RUNS)
    return times, _next_json(times, {})


def _upcoming_with_calendars(schedule: str, cursor: str, runs_planned: int) -> tuple[datetime, ...]:
    parsed = orjson.loads(schedule)
    calendars = occurrences.load_calendars([parsed])
    start = datetime.fromisoformat(cursor)
    return occurrences.upcoming_times(parsed, start, runs_planned, NEXT_RUNS, calendars)


@functools.lru_cache(maxsize=8192)
def _described(schedule: str) -> str:
    """The task's `describe` as JSON text, by its schedule as PostgreSQL writes it."""
    return orjson.dumps(describe(orjson.loads(schedule))).decode()


def _named(sql: str, values: Sequence[Any], prefix: str, params: dict[str, Any]) -> str:
    """Django's `%s` placeholders of `sql` as named ones (`prefix`_0, ...) beside the
    statement's, their values put in `params`."""
    parts = sql.split("%s")
    if len(parts) != len(values) + 1 or "%%" in sql:
        raise ValueError("unexpected placeholders in a query written into a statement")
    named = parts[0]
    for i, (value, part) in enumerate(zip(values, parts[1:], strict=True)):
        params[f"{prefix}_{i}"] = value
        named += f"%({prefix}_{i})s{part}"
    return named


def _page(ids: Ids, params: dict[str, Any]) -> str | None:
    """The FROM item of a page: `ids` as an array parameter, or a query of ids (a paginated
    queryset) as a subquery, in its order, so that the page's ids need no round trip of their
    own. None: no ids."""
    if not isinstance(ids, QuerySet):
        params["ids"] = list(ids)
        return "unnest(%(ids)s::uuid[]) WITH ORDINALITY AS page(id, position)" if ids else None
    # The slice as parameters, not literals (Django writes them into the SQL): every page of a
    # list is then one prepared statement per connection, not one per page number, each
    # planned on its first read (a few ms for this statement).
    query = ids.query.clone()
    low, high = query.low_mark, query.high_mark
    query.clear_limits()
    # The position is numbered by the list's own ordering, stated in the window: a window with
    # no ORDER BY numbers rows in an unspecified order, even when they come from an ordered
    # subquery.
    ordering = query.order_by or ids.model._meta.ordering
    if not ordering:
        raise ValueError("a page of ids needs an ordering")
    query.add_annotation(
        Window(RowNumber(), order_by=[_order_term(term) for term in ordering]), "position"
    )
    query.set_values(["id", "position"])
    try:
        sql, values = query.sql_with_params()
    except EmptyResultSet:  # an empty page, or a filter that matches nothing
        return None
    named = _named(sql, values, "page", params)
    if low or high is not None:
        params.update(page_offset=low, page_limit=high - low if high is not None else None)
        named += " LIMIT %(page_limit)s OFFSET %(page_offset)s"
    return f"({named}) AS page(id, position)"


def _order_term(term: Any) -> Any:
    """An ordering term as the queryset holds it (`"-created_at"`, or an expression) for a window's
    ORDER BY."""
    if not isinstance(term, str):
        return term
    return F(term[1:]).desc() if term.startswith("-") else F(term).asc()


def _total(counted: QuerySet | None, params: dict[str, Any]) -> str:
    """The `{total}` column: how many rows `counted` (the list's whole filtered query) has,
    counted by the statement that writes the page, in the same snapshot; NULL when the caller
    counts nothing. A list page thus costs one round trip, not a count and then the page."""
    if counted is None:
        return "NULL::bigint"
    sql, values = counted.order_by().values("pk").query.sql_with_params()
    return f"(SELECT count(*) FROM ({_named(sql, values, 'total', params)}) AS counted)"


def _page_rows(
    sql: str, ids: Ids, params: dict[str, Any], model: type[Model], counted: QuerySet | None = None
) -> list[tuple]:
    """The rows of `sql` with its `{page}` made of `ids` (none for no ids) and its `{total}`
    counting `counted`, read prepared on the alias the router picks for `model` (the replica
    for a GET)."""
    page = _page(ids, params)
    if page is None:
        return []
    sql = sql.replace("{page}", page).replace("{total}", _total(counted, params))
    with prepared_cursor(router.db_for_read(model)) as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def tasks_json(task_ids: Ids, *, owner: Any, now: datetime) -> list[RawJSON]:
    """Each of `owner`'s tasks among `task_ids` (ids, or a query of ids) as the API returns it,
    in that order; one statement for a whole page."""
    params = {
        "owner": owner.pk,
        "owner_name": owner.get_username(),
        "claimable": list(CLAIMABLE_STATUSES),
        "now": now,
        "grace": float(settings.TASKS_MISFIRE_GRACE_SECONDS),
    }
    return _tasks(_page_rows(_TASKS_SQL, task_ids, params, Task), now, owner.pk)[0]


def tasks_page_json(
    page: QuerySet, counted: QuerySet, *, owner: Any, now: datetime
) -> tuple[list[RawJSON], int | None]:
    """A list page: the tasks of `page` (a sliced query of ids) and how many `counted` (the
    whole list's query) holds, from one statement; the count is None when the page is empty."""
    params = {
        "owner": owner.pk,
        "owner_name": owner.get_username(),
        "claimable": list(CLAIMABLE_STATUSES),
        "now": now,
        "grace": float(settings.TASKS_MISFIRE_GRACE_SECONDS),
    }
    return _tasks(_page_rows(_TASKS_SQL, page, params, Task, counted), now, owner.pk)


_NOTHING_NEXT = _next_json((), {})


def _tasks(rows: list[tuple], now: datetime, owner_id: int) -> tuple[list[RawJSON], int | None]:
    if not rows:
        return [], None
    found = []
    # The owner's feed token, made on their first read that shows one (tasks/feed_tokens.py).
    url = task_feed_url(rows[0][-2] or feed_tokens.create_token(owner_id))
    for head, tail, status, schedule, cursor, runs_planned, times, ids, last_run, pk, *_ in rows:
        upcoming: tuple[datetime, ...] = ()
        shown = _NOTHING_NEXT
        if status == Task.Status.ACTIVE and cursor is not None:
            if '"exclude"' in schedule:  # its calendars may change: read them, not the cache
                upcoming = _upcoming_with_calendars(schedule, cursor, runs_planned)
                shown = _next_json(upcoming, {})
            else:
                upcoming, shown = _upcoming(schedule, cursor, runs_planned)
        if status == Task.Status.ACTIVE and times:  # planned, not begun: first
            merged = occurrences.merge_next_runs(times, upcoming, now=now, count=NEXT_RUNS)
            shown = _next_json(merged, dict(zip(times, ids, strict=True)))
        last = last_run or "null"
        describing = _described(schedule)
        calendar = orjson.dumps(url(pk)).decode()
        found.append(
            RawJSON(
                f'{head[:-1]}, "describe": {describing}, "last_run": {last}, {shown}, '
                f'"calendar_url": {calendar}, {tail[1:]}'
            )
        )
    return found, rows[0][-1]


def task_json(task_id: UUID, *, owner: Any, now: datetime) -> RawJSON | None:
    found = tasks_json([task_id], owner=owner, now=now)
    return found[0] if found else None


_ATTEMPTS_SQL = f"""
SELECT coalesce(json_agg(json_build_object(
           'number', a.number, 'started', {iso_sql("a.started_at")},
           'finished', {iso_sql("a.finished_at")}, 'outcome', a.outcome, 'error', a.error,
           'worker', a.worker, 'exit_code', a.exit_code, 'http_status', a.http_status)
           ORDER BY a.number), '[]')
  FROM tasks_attempt a WHERE a.run_id = r.id
"""

# RunSerializer's fields, in its order.
_RUNS_SQL = f"""
SELECT json_build_object(
           'id', r.id, 'task', r.task_id, 'scheduled_at', {iso_sql("r.scheduled_at")},
           'execute_at', {iso_sql("r.execute_at")}, 'status', r.status,
           -- The reason of the current wait only: a run cancelled or skipped while it
           -- waited keeps its last reason in the row, not in the API.
           'wait_reason', CASE WHEN r.status = 'waiting_for_resource' THEN r.wait_reason
                               ELSE '' END,
           'attempt', r.attempt,
           'max_attempts', r.max_attempts, 'priority', r.priority, 'worker', r.worker,
           'started_at', {iso_sql("r.started_at")}, 'finished_at', {iso_sql("r.finished_at")},
           'attempts', ({_ATTEMPTS_SQL}), 'exit_code', r.exit_code,
           'http_status', r.http_status, 'output', r.output, 'error', r.error,
           'zombie', r.zombie_since IS NOT NULL, 'zombie_since', {iso_sql("r.zombie_since")},
           'idempotency_key', {idempotency_key_sql("r.task_id", "r.scheduled_at")},
           'backfill', r.backfill
       )::text,
       {{total}}
  FROM {{page}}
  JOIN tasks_run r ON r.id = page.id
 WHERE r.owner_id = %(owner)s
 ORDER BY page.position
"""


def runs_json(run_ids: Ids, *, owner_id: int) -> list[RawJSON]:
    """Each of `owner_id`'s runs among `run_ids` (ids, or a query of ids) as the API returns
    it, in that order."""
    params: dict[str, Any] = {"owner": owner_id}
    return [RawJSON(text) for text, _ in _page_rows(_RUNS_SQL, run_ids, params, Run)]


def runs_page_json(
    page: QuerySet, counted: QuerySet, *, owner_id: int
) -> tuple[list[RawJSON], int | None]:
    """A list page of runs and how many `counted` holds (None when the page is empty), from
    one statement, as tasks_page_json."""
    params: dict[str, Any] = {"owner": owner_id}
    rows = _page_rows(_RUNS_SQL, page, params, Run, counted)
    return [RawJSON(text) for text, _ in rows], (rows[0][1] if rows else None)
