"""The data set `python -m bench admin` times the console over: 100,000 tasks and 1,000,000 runs
written with set-based SQL (INSERT ... SELECT generate_series), plus the few rows the other
console pages show (concurrency and rate keys, calendars, workflows and their runs, audit
entries), made through the product's own services.

Two users: `bench` (an operator) and `bench-user` (not staff), who owns every tenth task and so
about a tenth of the runs. Half of the runs belong to the 100 oldest tasks (a few busy tasks, as
in production), the other half are spread over all of them; 2 % of the tasks carry a
concurrency key. The runs cover the year before now, the ones still ahead `scheduled`, the ones
whose span holds now `running`; 4 % failed (two attempts, with their attempt rows), 1 % skipped,
0.5 % cancelled. Ids are UUIDv7 of the run's time, as the application writes them.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection
from rest_framework.test import APIClient

from tasks import schedules
from tasks.models import ConcurrencyKey, RateKey, Task
from tasks.transitions import calendars

TASKS = 100_000
OPERATOR, USER = "bench", "bench-user"
NAME_PREFIX = "bench task "

TASKS_SQL = """
INSERT INTO tasks_task (id, owner_id, name, kind, payload, schedule, schedule_type, priority,
                        status, max_attempts, retry_backoff_base, retry_backoff_cap, notify,
                        next_unplanned_at, runs_planned, concurrency, concurrency_key_id,
                        created_at, updated_at)
SELECT (lpad(to_hex(floor(extract(epoch FROM c.at) * 1000)::bigint), 12, '0') || '7'
        || substr(replace(gen_random_uuid()::text, '-', ''), 14))::uuid,
       CASE WHEN g.i %% 10 = 0 THEN %(user)s ELSE %(operator)s END,
       %(prefix)s || g.i, 'handler', '{"name": "bench", "args": {}}', %(schedule)s::jsonb,
       %(schedule_type)s, g.i %% 10,
       CASE g.i %% 100 WHEN 99 THEN 'cancelled' WHEN 98 THEN 'paused' ELSE 'active' END,
       5, 2.0, 600.0, '[]', NULL, 0,
       CASE WHEN k.id IS NULL THEN '{}'::jsonb
            ELSE jsonb_build_object('key', k.name, 'limit', 2) END,
       k.id, c.at, c.at
  FROM generate_series(1, %(count)s) AS g(i)
 CROSS JOIN LATERAL (SELECT %(created)s::timestamptz + g.i * interval '1 ms' AS at) AS c
 CROSS JOIN LATERAL (
      SELECT CASE g.i %% 50
                 WHEN 0 THEN (%(user_keys)s::bigint[])[
                     1 + (g.i / 50) %% cardinality(%(user_keys)s::bigint[])]
                 WHEN 1 THEN (%(operator_keys)s::bigint[])[
                     1 + (g.i / 50) %% cardinality(%(operator_keys)s::bigint[])]
             END AS key_id
  ) AS pick
  LEFT JOIN tasks_concurrencykey AS k ON k.id = pick.key_id
"""

# Runs lo..hi of N over [base, base + span): run i at base + i * step, for task k (1-based, in
# id order): even runs go to the 100 busy tasks, odd ones are spread over all of them.
RUNS_SQL = """
WITH t AS (
    SELECT array_agg(id ORDER BY id) AS ids, array_agg(owner_id ORDER BY id) AS owners,
           array_agg(priority ORDER BY id) AS prio,
           array_agg(concurrency_key_id ORDER BY id) AS keys, count(*)::int AS n
      FROM tasks_task WHERE name LIKE %(like)s
)
INSERT INTO tasks_run (id, task_id, owner_id, scheduled_at, execute_at, priority, status, attempt,
                       max_attempts, worker, heartbeat_at, started_at, finished_at, output, error,
                       concurrency_key_id, created_at)
SELECT (lpad(to_hex(floor(extract(epoch FROM a.at) * 1000)::bigint), 12, '0') || '7'
        || substr(replace(gen_random_uuid()::text, '-', ''), 14))::uuid,
       t.ids[a.k], t.owners[a.k], a.at, a.at, t.prio[a.k], s.status,
       CASE s.status WHEN 'scheduled' THEN 0 WHEN 'skipped' THEN 0 WHEN 'failed' THEN 2 ELSE 1 END,
       5, CASE WHEN s.status IN ('scheduled', 'skipped') THEN '' ELSE 'bench-worker' END,
       CASE WHEN s.status = 'running' THEN %(now)s::timestamptz END,
       CASE WHEN s.status NOT IN ('scheduled', 'skipped') THEN a.at + a.late END,
       CASE WHEN s.status IN ('succeeded', 'failed', 'cancelled') THEN a.at + a.late + a.took
            WHEN s.status = 'skipped' THEN a.at END,
       CASE WHEN s.status = 'succeeded' THEN 'ok' ELSE '' END,
       CASE WHEN s.status = 'failed'
            THEN E'Traceback (most recent call last):\\n  File "job.py", line 3, in main\\n'
                 || 'RuntimeError: bench failure ' || g.i ELSE '' END,
       t.keys[a.k], a.at
  FROM t, generate_series(%(lo)s::bigint, %(hi)s::bigint) AS g(i),
       LATERAL (
           SELECT %(base)s::timestamptz + g.i * %(step)s * interval '1 second' AS at,
                  CASE WHEN g.i %% 2 = 0 THEN 1 + (g.i / 2) %% least(100, t.n)
                       ELSE 1 + (g.i * 7919) %% t.n END AS k,
                  (g.i * 7919 %% 3000) * interval '1 ms' AS late,
                  CASE WHEN g.i %% 2 = 0 THEN 20 + g.i * 31 %% 280 ELSE 1 + g.i %% 9 END
                      * interval '1 second' AS took
       ) AS a,
       LATERAL (
           SELECT CASE WHEN a.at > %(now)s THEN 'scheduled'
                       WHEN a.at + a.late + a.took > %(now)s THEN 'running'
                       WHEN g.i %% 100 = 7 THEN 'skipped'
                       WHEN g.i %% 25 = 3 THEN 'failed'
                       WHEN g.i %% 200 = 11 THEN 'cancelled'
                       ELSE 'succeeded' END AS status
       ) AS s
"""

ATTEMPTS_SQL = """
INSERT INTO tasks_attempt (run_id, number, worker, started_at, finished_at, outcome, error)
SELECT run.id, a.number, run.worker, run.started_at, run.finished_at, 'failed', run.error
  FROM tasks_run AS run, generate_series(1, 2) AS a(number)
 WHERE run.status = 'failed'
"""

AUDIT_SQL = """
INSERT INTO tasks_auditentry (at, actor_id, actor_name, service_account, token_id,
                              client_address, user_agent, action, object_type, object_id,
                              object_name, owner_id, changes)
SELECT %(base)s::timestamptz + g.i * %(step)s * interval '1 second',
       o.owner, o.name, '', '', '10.0.0.1', 'bench', 'update', 'task', g.i::text,
       %(prefix)s || g.i, o.owner, '{"priority": [5, 6]}'
  FROM generate_series(1, %(count)s) AS g(i),
       LATERAL (SELECT CASE WHEN g.i %% 10 = 0 THEN %(user)s ELSE %(operator)s END AS owner,
                       CASE WHEN g.i %% 10 = 0 THEN %(user_name)s
                            ELSE %(operator_name)s END AS name) AS o
"""

# Fresh statistics and visibility maps after the bulk load (autovacuum would get there later).
VACUUM = [
    "VACUUM ANALYZE tasks_task",
    "VACUUM ANALYZE tasks_run",
    "VACUUM ANALYZE tasks_attempt",
    "VACUUM ANALYZE tasks_auditentry",
]

NOOP = {"kind": "handler", "payload": {"name": "noop"}}
DIAMOND = [
    {"id": "extract", "task": NOOP},
    {"id": "clean", "after": ["extract"], "task": NOOP},
    {"id": "enrich", "after": ["extract"], "task": NOOP},
    {"id": "load", "after": ["clean", "enrich"], "task": NOOP},
    {"id": "tidy", "after": ["load"], "on": "always", "task": NOOP},
]


def users() -> tuple[Any, Any]:
    model = get_user_model()
    operator, _ = model.objects.get_or_create(
        username=OPERATOR, defaults={"is_staff": True, "is_superuser": True}
    )
    user, _ = model.objects.get_or_create(username=USER, defaults={"is_staff": False})
    return operator, user


def populate(runs: int, *, tasks: int = TASKS, write: Any = print) -> None:
    """The data set, unless the database holds it already (a kept scratch database)."""
    operator, user = users()
    if Task.objects.filter(name__startswith=NAME_PREFIX).exists():
        write("data set found: reused")
        return
    started = time.monotonic()
    now = datetime.now(UTC)
    keys = _limit_keys(operator, user)
    _tasks(operator, user, keys, now, tasks)
    write(f"{tasks} tasks in {time.monotonic() - started:.1f} s")
    _runs(runs, now, write)
    with connection.cursor() as cursor:
        cursor.execute(ATTEMPTS_SQL)
        params = {"operator": operator.pk, "user": user.pk, "operator_name": OPERATOR}
        params |= {"user_name": USER, "prefix": NAME_PREFIX, "count": 200_000}
        params |= {"base": now - timedelta(days=365), "step": 365 * 86400 / 200_000}
        cursor.execute(AUDIT_SQL, params)
    _calendars(operator, user)
    _workflows(operator)
    _workflows(user)
    with connection.cursor() as cursor:
        for statement in VACUUM:
            cursor.execute(statement)
    write(f"data set made in {time.monotonic() - started:.1f} s")


def _limit_keys(operator: Any, user: Any) -> dict[str, list[int]]:
    ops = [
        ConcurrencyKey.objects.create(owner=operator, name=f"bench-key-{i}", max_running=2).pk
        for i in range(20)
    ]
    own = [
        ConcurrencyKey.objects.create(owner=user, name=f"user-key-{i}", max_running=2).pk
        for i in range(2)
    ]
    for i in range(5):
        RateKey.objects.create(
            owner=operator, name=f"bench-rate-{i}", rate_limit=10, per_seconds=60
        )
    return {"operator": ops, "user": own}


def _tasks(operator: Any, user: Any, keys: dict[str, list[int]], now: datetime, count: int) -> None:
    raw = {"type": "cron", "expression": "*/5 * * * *", "timezone": "Europe/Berlin"}
    schedule = schedules.normalize(raw, now=now)
    with connection.cursor() as cursor:
        cursor.execute(
            TASKS_SQL,
            {
                "operator": operator.pk,
                "user": user.pk,
                "prefix": NAME_PREFIX,
                "schedule": json.dumps(schedule),
                "schedule_type": schedule["type"],
                "created": now - timedelta(days=400),
                "count": count,
                "operator_keys": keys["operator"],
                "user_keys": keys["user"],
            },
        )


def _runs(runs: int, now: datetime, write: Any, chunk: int = 200_000) -> None:
    started = time.monotonic()
    span = timedelta(days=366)  # the year before now and a day ahead
    base = now - timedelta(days=365)
    with connection.cursor() as cursor:
        # Consistent by construction: no per-row foreign-key or summary triggers (a superuser
        # setting, as bench/data.py uses it).
        cursor.execute("SET session_replication_role = replica")
        for lo in range(0, runs, chunk):
            hi = min(runs, lo + chunk) - 1
            params = {"like": NAME_PREFIX + "%", "lo": lo, "hi": hi, "now": now, "base": base}
            cursor.execute(RUNS_SQL, {**params, "step": span.total_seconds() / runs})
            write(f"  {hi + 1} runs, {time.monotonic() - started:.0f} s")
        cursor.execute("RESET session_replication_role")


def _calendars(operator: Any, user: Any) -> None:
    for owner in (operator, user):
        for i in range(3):
            data = {"name": f"bench calendar {i}", "timezone": "Europe/Berlin"}
            calendars.create_calendar(owner=owner, data={**data, "dates": ["2026-12-24"]})


def _workflows(owner: Any, runs: int = 5) -> None:
    api = APIClient()
    api.force_authenticate(owner)
    for i in range(3):
        body = {"name": f"bench workflow {i}", "steps": DIAMOND}
        made = api.post("/api/v1/workflows", body, format="json")
        assert made.status_code == 201, made.content
        for _ in range(runs):
            response = api.post(f"/api/v1/workflows/{made.json()['id']}/run")
            assert response.status_code == 201, response.content
