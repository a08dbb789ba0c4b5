"""API representations built as JSON by PostgreSQL, for the endpoints that carry many runs.

A task list page carries 50 x 20 run summaries and a task's runs page 20 runs with their
attempts. Loading them as models, parsing every timestamp and formatting it again took most of
those requests' time; PostgreSQL writes the same JSON in a fraction of it, and the response
renderer (tasks/api/renderers.py) writes it as it is. The serializers stay the reference: tests
hold each of these equal to their output (tests/tasks/api/test_json_sql.py,
test_run_summaries.py).
"""

from __future__ import annotations

from uuid import UUID

import orjson
from django.db import connection

from tasks.api.renderers import RawJSON


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


# The latest runs of each task, by the (task_id, scheduled_at) unique index: 20 index entries per
# task however long its history is (a window function over the task's runs would read them all).
# PostgreSQL writes each task's list as JSON text: a page carries up to 50 x 20 summaries, and
# building them as Python dicts and encoding them again took more time than the query.
_RECENT_RUNS_SQL = f"""
SELECT t.id, (
       SELECT coalesce(json_agg(json_build_object(
                  'id', r.id, 'scheduled_at', {iso_sql("r.scheduled_at")}, 'status', r.status,
                  'attempt', r.attempt, 'started_at', {iso_sql("r.started_at")},
                  'finished_at', {iso_sql("r.finished_at")})
                  ORDER BY r.scheduled_at DESC), '[]')::text
         FROM (SELECT id, scheduled_at, status, attempt, started_at, finished_at FROM tasks_run
                WHERE task_id = t.id ORDER BY scheduled_at DESC LIMIT %s) AS r)
  FROM unnest(%s::uuid[]) AS t(id)
"""
RECENT_RUNS = 20


def recent_runs_json(task_ids: list[UUID]) -> dict[UUID, RawJSON]:
    """Each task's `runs` (API.md: the most recent 20) as JSON, in one query for a whole page.
    Matches RunSummarySerializer's output (a test holds them equal); the response renderer
    (tasks/api/renderers.py) writes them as they are."""
    if not task_ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(_RECENT_RUNS_SQL, [RECENT_RUNS, list(task_ids)])
        return {task_id: RawJSON(text) for task_id, text in cursor}


def recent_run_summaries(task_ids: list[UUID]) -> dict[UUID, list[dict]]:
    """recent_runs_json, read back into lists (one task's view, where `.data` is used as is)."""
    found = recent_runs_json(task_ids)
    return {task_id: orjson.loads(found[task_id].text) for task_id in task_ids}


_ATTEMPTS_SQL = f"""
SELECT coalesce(json_agg(json_build_object(
           'number', a.number, 'started', {iso_sql("a.started_at")},
           'finished', {iso_sql("a.finished_at")}, 'outcome', a.outcome, 'error', a.error,
           'worker', a.worker, 'exit_code', a.exit_code, 'http_status', a.http_status)
           ORDER BY a.number), '[]')
  FROM tasks_attempt a WHERE a.run_id = r.id
"""

# RunSerializer's fields, in its order; the idempotency key as Run.idempotency_key writes it.
_RUNS_SQL = f"""
SELECT json_build_object(
           'id', r.id, 'task', r.task_id, 'scheduled_at', {iso_sql("r.scheduled_at")},
           'execute_at', {iso_sql("r.execute_at")}, 'status', r.status, 'attempt', r.attempt,
           'max_attempts', r.max_attempts, 'priority', r.priority, 'worker', r.worker,
           'started_at', {iso_sql("r.started_at")}, 'finished_at', {iso_sql("r.finished_at")},
           'attempts', ({_ATTEMPTS_SQL}), 'exit_code', r.exit_code,
           'http_status', r.http_status, 'output', r.output, 'error', r.error,
           'idempotency_key', r.task_id || ':' || to_char(r.scheduled_at AT TIME ZONE 'UTC',
                                                         'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
       )::text
  FROM unnest(%(ids)s::uuid[]) WITH ORDINALITY AS page(id, position)
  JOIN tasks_run r ON r.id = page.id
 WHERE r.owner_id = %(owner)s
 ORDER BY page.position
"""


def runs_json(run_ids: list[UUID], *, owner_id: int) -> list[RawJSON]:
    """RunSerializer's output for each of `owner_id`'s runs among `run_ids`, in that order."""
    if not run_ids:
        return []
    with connection.cursor() as cursor:
        cursor.execute(_RUNS_SQL, {"ids": list(run_ids), "owner": owner_id})
        return [RawJSON(text) for (text,) in cursor]


def json_array(items: list[RawJSON]) -> RawJSON:
    return RawJSON("[" + ",".join(item.text for item in items) + "]")
