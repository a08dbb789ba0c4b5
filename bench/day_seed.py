"""A production day for `bench day`, with SQL in the real tables (bench/data.py's way).

Time compression: the run's window of `seconds` from `t0` stands for the 1,440 minutes of a day.
A daily task at minute m of the day (m drawn uniformly from 0..1439) gets `start_at = t0 + m *
seconds / 1440` and an interval of 86,400 s: it fires once in the window, at its compressed
minute, as it would once a day. The every-minute tasks (1 % of them) and the every-few-seconds
tasks (0.3 %: every 2, 5 or 10 s) keep real time: one shared start, `t0 + 60 s`, for the minute
tasks (a burst each minute, like `* * * * *`), staggered starts for the others. One task in ten
of each kind notifies a webhook channel of its succeeded runs.
History for retention: 2 finished runs per task over the last 60 days (so half of them older
than the reviewers' 30-day retention), attached to the minute tasks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from uuid import UUID

from django.db import connection

from bench import data
from tasks import schedules

USERNAME = "bench-day"
DAY_MINUTES = 1440
RETENTION_DAYS = 30
HISTORY_DAYS = 60
FREQUENT_EVERY = (2, 5, 10)

# One row per task; `at_sql` is its first fire time, `every_sql` its interval, from the task's
# number `g.i` and its own random number `g.r`. (A random() in the LATERAL subquery that names no
# column of `g` is evaluated once for all rows: every daily task then fired at the same instant.)
TASKS_SQL = """
INSERT INTO tasks_task (id, owner_id, name, kind, payload, schedule, schedule_type, priority,
                        status, max_attempts, retry_backoff_base, retry_backoff_cap, notify,
                        next_unplanned_at, runs_planned, created_at, updated_at)
SELECT UUID_TASK, %(owner)s, %(prefix)s || g.i, 'handler', '{"name": "bench", "args": {}}',
       jsonb_set(jsonb_set(%(schedule)s::jsonb, '{every}', to_jsonb(s.every)), '{start_at}',
                 to_jsonb(to_char(s.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))),
       'interval', 5, 'active', 5, 2.0, 600.0,
       CASE WHEN g.i %% 10 = 0 THEN %(notify)s::jsonb ELSE '[]'::jsonb END,
       s.at, 0, now(), now()
  FROM (SELECT i, random() AS r FROM generate_series(1, %(count)s) AS i) AS g,
       LATERAL (SELECT AT_SQL AS at, EVERY_SQL AS every) AS s
"""


@dataclass(frozen=True)
class Seeded:
    owner: int
    daily: int
    minute: int
    frequent: int
    history: int
    task_ids: list[UUID]
    run_ids: list[UUID]


def split(tasks: int) -> tuple[int, int, int]:
    """(daily, every minute, every few seconds) of `tasks`."""
    minute = max(1, tasks // 100)
    frequent = max(3, tasks * 3 // 1000)
    return tasks - minute - frequent, minute, frequent


def _insert(owner: int, count: int, *, prefix: str, at_sql: str, every_sql: str, **params) -> None:
    template = schedules.normalize(
        {"type": "interval", "every": 60, "start_at": "2026-01-01T00:00:00Z"},
        now=datetime.now(UTC),
    )
    sql = TASKS_SQL.replace("AT_SQL", at_sql).replace("EVERY_SQL", every_sql)
    sql = sql.replace("UUID_TASK", data.uuid7_sql("clock_timestamp()"))
    with connection.cursor() as cursor:
        cursor.execute(
            sql,
            {
                "owner": owner,
                "count": count,
                "prefix": prefix,
                "schedule": json.dumps(template),
                **params,
            },
        )


def seed(*, tasks: int, t0: datetime, seconds: float, channel: str) -> Seeded:
    daily, minute, frequent = split(tasks)
    owner = data.owner_id(USERNAME)
    notify = json.dumps([{"channel": channel, "events": ["succeeded"]}])
    common = {"t0": t0, "notify": notify}
    with connection.cursor() as cursor:
        cursor.execute("SELECT setseed(0.42)")  # the same minutes in every run
    _insert(
        owner,
        minute,
        prefix="every minute ",
        at_sql="%(t0)s::timestamptz + interval '60 seconds'",
        every_sql="60",
        **common,
    )
    history = tasks * 2
    every = f"(ARRAY{list(FREQUENT_EVERY)})[1 + g.i %% {len(FREQUENT_EVERY)}]"
    data.insert_history(owner, history, span=timedelta(days=HISTORY_DAYS))
    _insert(
        owner,
        frequent,
        prefix="every few seconds ",
        at_sql=f"%(t0)s::timestamptz + ((g.i * 0.371) %% {every}) * interval '1 second'",
        every_sql=every,
        **common,
    )
    _insert(
        owner,
        daily,
        prefix="daily ",
        at_sql="%(t0)s::timestamptz + floor(g.r * 1440) * %(slot)s * interval '1 second'",
        every_sql="86400",
        slot=seconds / DAY_MINUTES,
        **common,
    )
    data.vacuum_analyze()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id FROM tasks_task WHERE owner_id = %s ORDER BY random() LIMIT 5000", [owner]
        )
        task_ids = [row[0] for row in cursor.fetchall()]
        cursor.execute(
            "SELECT id FROM tasks_run WHERE owner_id = %s AND finished_at > now() - %s"
            " ORDER BY random() LIMIT 5000",
            [owner, timedelta(days=RETENTION_DAYS - 1)],
        )
        run_ids = [row[0] for row in cursor.fetchall()]
    return Seeded(owner, daily, minute, frequent, history, task_ids, run_ids)
