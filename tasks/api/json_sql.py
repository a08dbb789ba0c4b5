"""Every read of the task API (a task, a page of tasks, a run, a task's runs) as JSON built by
PostgreSQL: the one place the output shape is written. The statements are named in
tasks/sql/api_json.sql (a read by ids, and a list page with the list's ORM query written in by
the SQL loader); their rows are read here by column name.

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
from psycopg.rows import dict_row

from scheduler_project.sql import Statements, queries
from scheduler_project.web.renderers import RawJSON
from tasks import feed_tokens, history, occurrences
from tasks.api.calendar_feed import task_feed_url
from tasks.db import prepared_cursor
from tasks.models import CLAIMABLE_STATUSES, Run, Task
from tasks.schedule_describe import describe

RECENT_RUNS = history.RECENT_RUNS  # a task's `runs`: its latest 20 begun runs
NEXT_RUNS = 5  # a task's `next_runs` (docs/api.md: up to the next 5 fire times)


def _statements() -> Statements:
    """The reads' statements (tasks/sql/api_json.sql), with the lengths of a task's lists."""
    return queries(
        "tasks",
        "api_json.sql",
        recent_runs=RECENT_RUNS,
        next_runs=NEXT_RUNS,
        scanned=RECENT_RUNS + NEXT_RUNS,
    )


def iso_json(times: list[datetime]) -> str:
    """`times` as a JSON array of what the SQL fragment `iso_time` writes, for the few times
    computed in Python (a task's next fire times, a schedule preview): orjson's RFC 3339 in UTC
    is that format (a test holds both equal to DRF's DateTimeField), at a tenth of the cost of
    DRF's field."""
    return orjson.dumps([at.astimezone(UTC) for at in times], option=orjson.OPT_UTC_Z).decode()


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


def _list_page(page: QuerySet) -> tuple[str, Sequence[Any]] | None:
    """The list's query of a page's (id, position), numbered by the list's own ordering, without
    its slice (`page_of_list` takes the slice as parameters), as Django's compiler writes it;
    None when it selects nothing."""
    query = page.query.clone()
    query.clear_limits()
    # The position is numbered by the list's own ordering, stated in the window: a window with
    # no ORDER BY numbers rows in an unspecified order, even when they come from an ordered
    # subquery.
    ordering = query.order_by or page.model._meta.ordering
    if not ordering:
        raise ValueError("a page of ids needs an ordering")
    query.add_annotation(
        Window(RowNumber(), order_by=[_order_term(term) for term in ordering]), "position"
    )
    query.set_values(["id", "position"])
    try:
        return query.sql_with_params()
    except EmptyResultSet:  # an empty page, or a filter that matches nothing
        return None


def _order_term(term: Any) -> Any:
    """An ordering term as the queryset holds it (`"-created_at"`, or an expression) for a window's
    ORDER BY."""
    if not isinstance(term, str):
        return term
    return F(term[1:]).desc() if term.startswith("-") else F(term).asc()


def _rows_by_ids(
    name: str, ids: Sequence[UUID], params: dict[str, Any], model: type[Model]
) -> list[dict[str, Any]]:
    """The rows of statement `name` for `ids` (none for no ids), by column name, read prepared
    on the alias the router picks for `model` (the replica for a GET)."""
    if not ids:
        return []
    params["ids"] = list(ids)
    return _read(_statements()[name], params, model)


def _rows_of_page(
    name: str, page: QuerySet, counted: QuerySet, params: dict[str, Any], model: type[Model]
) -> list[dict[str, Any]]:
    """The rows of list page statement `name`: the page's ids selected by `page` (a sliced query
    of ids) and the whole list counted by `counted`, in one statement. A union (a member's
    visible parts, accounts/access.py `visible_counted`) is counted as it is: its parts select
    their keys alone, unordered."""
    selected = _list_page(page)
    if selected is None:
        return []
    low, high = page.query.low_mark, page.query.high_mark
    params.update(page_offset=low, page_limit=high - low if high is not None else None)
    if not counted.query.combinator:
        counted = counted.order_by().values("pk")
    counting = counted.query.sql_with_params()
    sql = _statements().compose(name, params, page=selected, counted=counting)
    return _read(sql, params, model)


def _read(sql: str, params: dict[str, Any], model: type[Model]) -> list[dict[str, Any]]:
    with prepared_cursor(router.db_for_read(model), row_factory=dict_row) as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _task_params(owner: Any, now: datetime) -> dict[str, Any]:
    return {
        "owner": owner.pk,
        "owner_name": owner.get_username(),
        "claimable": list(CLAIMABLE_STATUSES),
        "now": now,
        "grace": float(settings.TASKS_MISFIRE_GRACE_SECONDS),
    }


def tasks_json(task_ids: Sequence[UUID], *, owner: Any, now: datetime) -> list[RawJSON]:
    """Each of `owner`'s tasks among `task_ids` as the API returns it, in that order; one
    statement for a whole page."""
    rows = _rows_by_ids("tasks_by_ids", task_ids, _task_params(owner, now), Task)
    return _tasks(rows, now, owner.pk)[0]


def tasks_page_json(
    page: QuerySet, counted: QuerySet, *, owner: Any, now: datetime
) -> tuple[list[RawJSON], int | None]:
    """A list page: the tasks of `page` (a sliced query of ids) and how many `counted` (the
    whole list's query) holds, from one statement; the count is None when the page is empty."""
    rows = _rows_of_page("tasks_page", page, counted, _task_params(owner, now), Task)
    return _tasks(rows, now, owner.pk)


def visible_tasks_page_json(
    *, owner: Any, low: int, high: int, now: datetime
) -> tuple[list[RawJSON], int | None]:
    """Tasks `low` to `high` of what `owner` sees (accounts/access.py `visible`), newest first
    and then by id (the list's default order), and how many they see, from one statement whose
    parts are named SQL (`tasks_visible_page`), not the ORM's: the same statement for any
    number of teams; the count is None when the page is empty."""
    params = _task_params(owner, now)
    params.update(page_offset=low, page_limit=high - low, page_high=high)
    rows = _read(_statements()["tasks_visible_page"], params, Task)
    return _tasks(rows, now, owner.pk)


_NOTHING_NEXT = _next_json((), {})


def _tasks(
    rows: list[dict[str, Any]], now: datetime, owner_id: int
) -> tuple[list[RawJSON], int | None]:
    if not rows:
        return [], None
    found = []
    # The owner's feed token, made on their first read that shows one (tasks/feed_tokens.py).
    url = task_feed_url(rows[0]["feed_token"] or feed_tokens.create_token(owner_id))
    for row in rows:
        status, schedule, cursor = row["status"], row["schedule"], row["cursor"]
        times = row["ahead_times"]
        upcoming: tuple[datetime, ...] = ()
        shown = _NOTHING_NEXT
        if status == Task.Status.ACTIVE and cursor is not None:
            if '"exclude"' in schedule:  # its calendars may change: read them, not the cache
                upcoming = _upcoming_with_calendars(schedule, cursor, row["runs_planned"])
                shown = _next_json(upcoming, {})
            else:
                upcoming, shown = _upcoming(schedule, cursor, row["runs_planned"])
        if status == Task.Status.ACTIVE and times:  # planned, not begun: first
            merged = occurrences.merge_next_runs(times, upcoming, now=now, count=NEXT_RUNS)
            shown = _next_json(merged, dict(zip(times, row["ahead_ids"], strict=True)))
        last = row["last_run"] or "null"
        describing = _described(schedule)
        calendar = orjson.dumps(url(row["id"])).decode()
        # The members computed here go between the statement's two parts of the object.
        found.append(
            RawJSON(
                f'{row["head"][:-1]}, "describe": {describing}, "last_run": {last}, {shown}, '
                f'"calendar_url": {calendar}, {row["tail"][1:]}'
            )
        )
    return found, rows[0]["total"]


def task_json(task_id: UUID, *, owner: Any, now: datetime) -> RawJSON | None:
    found = tasks_json([task_id], owner=owner, now=now)
    return found[0] if found else None


def runs_json(run_ids: Sequence[UUID], *, owner_id: int) -> list[RawJSON]:
    """Each of `owner_id`'s runs among `run_ids` as the API returns it, in that order."""
    rows = _rows_by_ids("runs_by_ids", run_ids, {"owner": owner_id}, Run)
    return [RawJSON(row["run"]) for row in rows]


def runs_page_json(
    page: QuerySet, counted: QuerySet, *, owner_id: int
) -> tuple[list[RawJSON], int | None]:
    """A list page of runs and how many `counted` holds (None when the page is empty), from
    one statement, as tasks_page_json."""
    rows = _rows_of_page("runs_page", page, counted, {"owner": owner_id}, Run)
    return [RawJSON(row["run"]) for row in rows], (rows[0]["total"] if rows else None)
