"""Every read of the task API (a task, a page of tasks, a run, a task's runs) as JSON built by
PostgreSQL: the one place the output shape is written.

A task list page carries 50 tasks with 20 run summaries each, a task's runs page 20 runs with
their attempts. Loading them as models, parsing every timestamp and formatting it again took
most of those requests' time; PostgreSQL writes the same JSON in a fraction of it, and the
response renderer (tasks/api/renderers.py) writes it as it is. The serializers describe this
shape in the OpenAPI schema; tests hold every served response to that schema
(tests/tasks/api/test_schema_conformance.py) and these statements to DRF's formats
(tests/tasks/api/test_json_sql.py).

Only a task's `next_runs` is computed in Python: the schedule's fire times come from the same
code the scheduler plans with (tasks/schedules.py), and are written into the task's JSON text.
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
from django.db.models import Model, QuerySet

from tasks import planning
from tasks.api.renderers import RawJSON
from tasks.db import prepared_cursor
from tasks.ids import idempotency_key_sql
from tasks.models import CLAIMABLE_STATUSES, Run, Task

Ids = Sequence[UUID] | QuerySet
RECENT_RUNS = 20  # a task's `runs` (docs/api.md: the most recent 20)
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


# A task's latest runs (RunSummarySerializer), by the (task_id, scheduled_at) unique index: 20
# index entries per task however long its history is (a window function would read them all).
# A page carries 1,000 of them. A finished run's JSON is kept on the run by the database
# (tasks/sql/run_summary.sql); the others are written by the same function as they are read.
# string_agg takes the rows in the order the subquery's LIMIT gives them (newest first): an
# ORDER BY of its own sorted them again, for a sixteenth of the statement's time.
# The same 20 rows give the occurrences planned but not started (next_runs lists them first):
# they are the task's latest, so when fewer than 20 of its runs lie ahead, all of them are
# among these; only a task with 20 or more ahead needs a probe of its own (`_PENDING_SQL`).
# A probe for each of a page's 50 tasks was a quarter of the tasks' part of the statement.
_RECENT_RUNS_SQL = f"""
SELECT coalesce('[' || string_agg(
           coalesce(r.summary, tasks_run_summary(r.id, r.scheduled_at, r.status, r.attempt,
                                                 r.started_at, r.finished_at)), ',')
           || ']', '[]') AS runs,
       (array_agg(r.scheduled_at ORDER BY r.scheduled_at)
            FILTER (WHERE r.status = ANY(%(claimable)s) AND r.attempt = 0
                          AND r.scheduled_at >= %(now)s))[:{NEXT_RUNS}] AS pending,
       count(*) FILTER (WHERE r.scheduled_at >= %(now)s) AS ahead
  FROM (SELECT id, scheduled_at, status, attempt, started_at, finished_at, summary FROM tasks_run
         WHERE task_id = t.id ORDER BY scheduled_at DESC LIMIT {RECENT_RUNS}) AS r"""

_PENDING_SQL = f"""ARRAY(
SELECT scheduled_at FROM tasks_run
 WHERE task_id = t.id AND status = ANY(%(claimable)s) AND attempt = 0 AND scheduled_at >= %(now)s
 ORDER BY scheduled_at LIMIT {NEXT_RUNS})"""

# TaskOutputSerializer's fields in its order, in two parts: `next_runs` goes between them. The
# last columns are what next_runs needs: the occurrences planned but not started come first.
_TASKS_SQL = f"""
SELECT json_build_object(
           'id', t.id, 'owner', %(owner_name)s::text, 'name', t.name, 'dedup_key', t.dedup_key,
           'kind', t.kind, 'payload', t.payload,
           'executable', nullif(regexp_replace(t.executable, '^.*/', ''), ''),
           -- A recurring schedule shows the misfire grace that applies (planning.shown_schedule).
           'schedule', CASE WHEN t.schedule->>'type' = 'once'
                              OR coalesce(t.schedule->'misfire_grace', 'null') <> 'null'
                            THEN t.schedule
                            ELSE t.schedule || jsonb_build_object('misfire_grace', %(grace)s)
                            END,
           'priority', t.priority, 'max_attempts', t.max_attempts,
           'retry_backoff', json_build_object('base', t.retry_backoff_base,
                                              'cap', t.retry_backoff_cap),
           'timeout', t.timeout, 'notify', t.notify, 'resources', t.resources,
           'on_zombie', t.on_zombie, 'status', t.status,
           'next_run_at', {iso_sql("t.next_run_at")})::text,
       '{{"runs":' || recent.runs || ',"created_at":"' || {iso_sql("t.created_at")}
           || '","updated_at":"' || {iso_sql("t.updated_at")} || '"}}',
       t.status, t.schedule::text, t.next_run_at::text, t.runs_planned,
       CASE WHEN t.status <> 'active' THEN NULL
            WHEN recent.ahead < {RECENT_RUNS} THEN recent.pending
            ELSE {_PENDING_SQL} END,
       {{total}}
  FROM {{page}}
  JOIN tasks_task t ON t.id = page.id
 CROSS JOIN LATERAL ({_RECENT_RUNS_SQL}) AS recent
 WHERE t.owner_id = %(owner)s
 ORDER BY page.position
"""


@functools.lru_cache(maxsize=8192)
def _upcoming(
    schedule: str, next_run_at: str, runs_planned: int
) -> tuple[tuple[datetime, ...], str]:
    """A task's upcoming fire times (planning.upcoming_times) and their JSON, by its schedule
    and next_run_at as PostgreSQL writes them (jsonb and timestamptz as text: canonical). They
    change only when the task is planned or edited, and tasks are read far more often than
    either: a list page read again computes none of its 50 tasks' times (they were a tenth of
    the page's time), and parses neither a schedule nor a time."""
    start = datetime.fromisoformat(next_run_at)
    times = planning.upcoming_times(orjson.loads(schedule), start, runs_planned, NEXT_RUNS)
    return times, iso_json(list(times))


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
    try:
        sql, values = query.sql_with_params()
    except EmptyResultSet:  # an empty page, or a filter that matches nothing
        return None
    named = _named(sql, values, "page", params)
    if low or high is not None:
        params.update(page_offset=low, page_limit=high - low if high is not None else None)
        named += " LIMIT %(page_limit)s OFFSET %(page_offset)s"
    return f"(SELECT id, row_number() OVER () AS position FROM ({named}) AS q(id)) AS page"


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
    params = {"owner": owner.pk, "owner_name": owner.get_username(),
              "claimable": list(CLAIMABLE_STATUSES), "now": now,
              "grace": float(settings.TASKS_MISFIRE_GRACE_SECONDS)}  # fmt: skip
    return _tasks(_page_rows(_TASKS_SQL, task_ids, params, Task), now)[0]


def tasks_page_json(
    page: QuerySet, counted: QuerySet, *, owner: Any, now: datetime
) -> tuple[list[RawJSON], int | None]:
    """A list page: the tasks of `page` (a sliced query of ids) and how many `counted` (the
    whole list's query) holds, from one statement; the count is None when the page is empty."""
    params = {"owner": owner.pk, "owner_name": owner.get_username(),
              "claimable": list(CLAIMABLE_STATUSES), "now": now,
              "grace": float(settings.TASKS_MISFIRE_GRACE_SECONDS)}  # fmt: skip
    return _tasks(_page_rows(_TASKS_SQL, page, params, Task, counted), now)


def _tasks(rows: list[tuple], now: datetime) -> tuple[list[RawJSON], int | None]:
    found = []
    for head, tail, status, schedule, next_run_at, runs_planned, pending, _ in rows:
        upcoming: tuple[datetime, ...] = ()
        shown = "[]"
        if status == Task.Status.ACTIVE and next_run_at is not None:
            upcoming, shown = _upcoming(schedule, next_run_at, runs_planned)
        if status == Task.Status.ACTIVE and pending:  # planned, not started: first
            times = planning.merge_next_runs(pending, upcoming, now=now, count=NEXT_RUNS)
            shown = iso_json(times)
        found.append(RawJSON(f'{head[:-1]}, "next_runs" : {shown}, {tail[1:]}'))
    return found, (rows[0][-1] if rows else None)


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
           'idempotency_key', {idempotency_key_sql("r.task_id", "r.scheduled_at")}
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
