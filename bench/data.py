"""Bulk data for the benchmarks, written with SQL (INSERT ... SELECT generate_series), not the API.

Tasks and finished runs (with their attempt rows) in the real tables, with time-ordered UUIDv7
ids as the application writes them, so indexes grow at the right edge as they do in production.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from django.contrib.auth import get_user_model
from django.db import DatabaseError, connection, transaction

from tasks import schedules
from tasks.db import RUN_DUE_CHANNEL, notify


def uuid7_sql(ts: str) -> str:
    """SQL for a UUIDv7 of timestamp `ts`: 48 bits of milliseconds, version 7, then the random
    bits of gen_random_uuid() (its variant kept). Inline: a SQL function costs 5x as much."""
    return (
        f"(lpad(to_hex(floor(extract(epoch FROM {ts}) * 1000)::bigint), 12, '0') || '7' ||"
        " substr(replace(gen_random_uuid()::text, '-', ''), 14))::uuid"
    )


TASKS_SQL = """
INSERT INTO tasks_task (id, owner_id, name, kind, payload, schedule, schedule_type, priority,
                        status, max_attempts, retry_backoff_base, retry_backoff_cap, notify,
                        next_unplanned_at, runs_planned, created_at, updated_at)
SELECT UUID_TASK, %(owner)s,
       %(prefix)s || g.i, 'handler', '{"name": "bench", "args": {}}', %(schedule)s::jsonb,
       %(schedule_type)s, (g.i %% 10), 'active', 5, 2.0, 600.0, '[]',
       %(next_unplanned_at)s, %(runs_planned)s,
       %(created)s::timestamptz + g.i * interval '1 ms', %(created)s
  FROM generate_series(1, %(count)s) AS g(i)
RETURNING id
""".replace("UUID_TASK", uuid7_sql("(%(created)s::timestamptz + g.i * interval '1 ms')"))

# Runs `lo`..`hi` of the history: run i belongs to task i mod n, scheduled `step` after run i-1;
# 95 % succeeded, 4 % failed (after two attempts), 1 % skipped (no attempt).
HISTORY_SQL = """
WITH t AS (
    SELECT array_agg(id ORDER BY id) AS ids, array_agg(priority ORDER BY id) AS prio,
           count(*)::int AS n
      FROM tasks_task WHERE owner_id = %(owner)s
), runs AS (
    INSERT INTO tasks_run (id, task_id, owner_id, scheduled_at, execute_at, priority, status,
                           attempt, max_attempts, worker, started_at, finished_at, output, error,
                           created_at)
    SELECT UUID_RUN, t.ids[1 + g.i %% t.n], %(owner)s, s.at, s.at,
           t.prio[1 + g.i %% t.n], s.status,
           CASE s.status WHEN 'skipped' THEN 0 WHEN 'failed' THEN 2 ELSE 1 END, 5,
           'bench-history',
           CASE WHEN s.status <> 'skipped' THEN s.at + interval '3 ms' END,
           s.at + interval '8 ms', '',
           CASE s.status WHEN 'failed' THEN 'exit code 1' ELSE '' END, s.at
      FROM t, generate_series(%(lo)s::bigint, %(hi)s::bigint) AS g(i),
           LATERAL (SELECT %(base)s::timestamptz + g.i * %(step)s * interval '1 second' AS at,
                           CASE WHEN g.i %% 100 = 7 THEN 'skipped'
                                WHEN g.i %% 25 = 3 THEN 'failed'
                                ELSE 'succeeded' END AS status) AS s
    RETURNING id, status, started_at, finished_at
)
INSERT INTO tasks_attempt (run_id, number, worker, started_at, finished_at, outcome, error)
SELECT runs.id, a.number, 'bench-history', runs.started_at, runs.finished_at,
       CASE WHEN runs.status = 'failed' THEN 'failed' ELSE 'succeeded' END,
       CASE WHEN runs.status = 'failed' THEN 'exit code 1' ELSE '' END
  FROM runs, generate_series(1, CASE runs.status WHEN 'failed' THEN 2 WHEN 'skipped' THEN 0
                                                  ELSE 1 END) AS a(number)
""".replace("UUID_RUN", uuid7_sql("s.at"))


# `count` one-time tasks due now and their runs, as creation.create_tasks stores them:
# the task already planned (runs_planned 1, next_unplanned_at NULL), its run `scheduled`.
DUE_SQL = """
WITH t AS (
    INSERT INTO tasks_task (id, owner_id, name, kind, payload, schedule, schedule_type, priority,
                            status, max_attempts, retry_backoff_base, retry_backoff_cap, notify,
                            next_unplanned_at, runs_planned, created_at, updated_at)
    SELECT UUID_NOW, %(owner)s, 'due', 'handler', '{"name": "bench", "args": {}}',
           %(schedule)s::jsonb, 'once', 5, 'active', 5, 2.0, 600.0, '[]', NULL, 1, now(), now()
      FROM generate_series(1, %(count)s)
    RETURNING id
)
INSERT INTO tasks_run (id, task_id, owner_id, scheduled_at, execute_at, priority, status, attempt,
                       max_attempts, worker, output, error, created_at)
SELECT UUID_NOW, t.id, %(owner)s, %(at)s, %(at)s, 5, 'scheduled', 0, 5, '', '', '', now() FROM t
""".replace("UUID_NOW", uuid7_sql("clock_timestamp()"))


def enqueue_due(owner: int, count: int) -> None:
    """`count` no-op runs due now, in one statement and one NOTIFY (a cheap feeder)."""
    at = datetime.now(UTC)
    schedule = schedules.normalize(
        {"type": "once", "run_at": at.isoformat().replace("+00:00", "Z")}, now=at
    )
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            DUE_SQL, {"owner": owner, "count": count, "schedule": json.dumps(schedule), "at": at}
        )
        notify(RUN_DUE_CHANNEL)


def owner_id(username: str) -> int:
    user, _ = get_user_model().objects.get_or_create(username=username)
    return user.pk


def insert_tasks(
    owner: int,
    count: int,
    *,
    raw_schedule: dict,
    next_unplanned_at: datetime | None,
    prefix: str = "bench ",
    runs_planned: int = 0,
) -> list[UUID]:
    """`count` active handler tasks sharing one schedule; returns their ids (creation order)."""
    now = datetime.now(UTC)
    schedule = schedules.normalize(raw_schedule, now=now)
    with connection.cursor() as cursor:
        cursor.execute(
            TASKS_SQL,
            {
                "owner": owner,
                "prefix": prefix,
                "schedule": json.dumps(schedule),
                "schedule_type": schedule["type"],
                "next_unplanned_at": next_unplanned_at,
                "runs_planned": runs_planned,
                "created": now - timedelta(days=400),
                "count": count,
            },
        )
        return [row[0] for row in cursor.fetchall()]


def insert_history(
    owner: int,
    rows: int,
    *,
    span: timedelta = timedelta(days=365),
    chunk: int = 250_000,
    progress: Callable[[int, float], None] | None = None,
) -> float:
    """`rows` finished runs (and their attempts) of `owner`'s tasks, ending an hour ago;
    committed chunk by chunk. Returns the seconds it took."""
    started = time.monotonic()
    end = datetime.now(UTC) - timedelta(hours=1)
    step = span.total_seconds() / max(rows, 1)
    with connection.cursor() as cursor:
        # The rows are consistent by construction: skip the per-row foreign-key triggers (a
        # superuser setting; without it the load is about a third slower, nothing else changes).
        replica = _try(cursor, "SET session_replication_role = replica")
        for lo in range(0, rows, chunk):
            hi = min(rows, lo + chunk) - 1
            cursor.execute(
                HISTORY_SQL,
                {"owner": owner, "lo": lo, "hi": hi, "base": end - span, "step": step},
            )
            if progress:
                progress(hi + 1, time.monotonic() - started)
        if replica:
            cursor.execute("RESET session_replication_role")
    return time.monotonic() - started


def _try(cursor: Any, sql: str) -> bool:
    try:
        with transaction.atomic():
            cursor.execute(sql)
    except DatabaseError:
        return False
    return True


def vacuum_analyze() -> None:
    """Fresh statistics after a bulk load (autovacuum would get there later): without them the
    planner reads a million-row table as empty and picks sequential scans."""
    with connection.cursor() as cursor:
        for table in ("tasks_task", "tasks_run", "tasks_attempt"):
            cursor.execute(f"VACUUM ANALYZE {table}")


def share_with_teams(owner: int, colleague: int, teams: int) -> None:
    """`teams` teams with `owner` an editor of each; every second task of `owner`'s, with its
    runs, becomes `colleague`'s in one of them (round robin)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO accounts_team (slug, name, created_at)"
            " SELECT 'bench-' || i, 'bench ' || i, now() FROM generate_series(1, %s) AS i"
            " RETURNING id",
            [teams],
        )
        team_ids = [row[0] for row in cursor.fetchall()]
        cursor.execute(
            "INSERT INTO accounts_membership (team_id, user_id, role, created_at)"
            " SELECT unnest(%s::bigint[]), %s, 'editor', now()",
            [team_ids, owner],
        )
        cursor.execute(
            """
            WITH moved AS (
                UPDATE tasks_task t SET owner_id = %(colleague)s,
                       team_id = (%(teams)s::bigint[])[1 + (n.i / 2) %% cardinality(%(teams)s)]
                  FROM (SELECT id, row_number() OVER (ORDER BY id) AS i FROM tasks_task
                         WHERE owner_id = %(owner)s) AS n
                 WHERE t.id = n.id AND n.i %% 2 = 0
                RETURNING t.id)
            UPDATE tasks_run r SET owner_id = %(colleague)s FROM moved WHERE r.task_id = moved.id
            """,
            {"owner": owner, "colleague": colleague, "teams": team_ids},
        )


def sample_ids(table: str, owner: int, limit: int) -> list[UUID]:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id FROM {table} WHERE owner_id = %s ORDER BY random() LIMIT %s",
            [owner, limit],
        )
        return [row[0] for row in cursor.fetchall()]


def table_sizes() -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname, pg_size_pretty(pg_total_relation_size(oid)) FROM pg_class"
            " WHERE relname IN ('tasks_run', 'tasks_attempt', 'tasks_task')"
        )
        return dict(cursor.fetchall())
