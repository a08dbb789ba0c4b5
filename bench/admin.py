"""`python -m bench admin`: time the admin changelists over a million runs (docs/operations.md,
"Admin at scale"), on a scratch database (it inserts a million rows)."""

from __future__ import annotations

import statistics
import time

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext

from tasks.models import Run, Task

# A year of history for 1,000 tasks: UUIDv7 ids in time order, 95 % succeeded, 3 % failed,
# 1 % cancelled, 1 % skipped, then a live queue (scheduled, running) at the end.
_TASKS_SQL = """
INSERT INTO tasks_task (id, owner_id, name, kind, payload, schedule, schedule_type, priority,
                        status, max_attempts, retry_backoff_base, retry_backoff_cap, notify,
                        runs_planned, created_at, updated_at)
SELECT gen_random_uuid(), %(owner)s, 'bench task ' || g, 'handler', '{"name": "noop"}',
       '{"type": "interval", "every": 30}', 'interval', g %% 10, 'active', 5, 2, 600, '[]', 0,
       now(), now()
  FROM generate_series(1, 1000) g
"""
_RUNS_SQL = """
WITH t AS (SELECT id, priority, row_number() OVER (ORDER BY id) - 1 AS n FROM tasks_task),
g AS (
    SELECT g, now() - interval '365 days' + (g * interval '365 days') / %(runs)s AS at,
           random() AS r
      FROM generate_series(1, %(runs)s) g
)
INSERT INTO tasks_run (id, task_id, owner_id, scheduled_at, execute_at, priority, status, attempt,
                       max_attempts, worker, started_at, finished_at, output, error, created_at)
SELECT (lpad(to_hex((extract(epoch FROM g.at) * 1000)::bigint), 12, '0') || '7'
        || substr(md5(g.g::text), 1, 3) || '8' || substr(md5(g.g::text), 4, 15))::uuid,
       t.id, %(owner)s, g.at, g.at, t.priority,
       CASE WHEN g.r < 0.95 THEN 'succeeded' WHEN g.r < 0.98 THEN 'failed'
            WHEN g.r < 0.99 THEN 'cancelled' ELSE 'skipped' END,
       1, 5, 'worker:bench', g.at + interval '5 ms', g.at + interval '50 ms', 'ok', '', g.at
  FROM g JOIN t ON t.n = g.g %% 1000
"""
URLS = [
    ("runs, no filter", "/admin/tasks/run/"),
    ("runs, page 50", "/admin/tasks/run/?p=50"),
    ("runs, status=failed", "/admin/tasks/run/?status__exact=failed"),
    ("runs, status=scheduled (none)", "/admin/tasks/run/?status__exact=scheduled"),
    (
        "runs, failed, scheduled today",
        "/admin/tasks/run/?status__exact=failed&scheduled_at__gte={today}+00:00:00%2B00:00",
    ),
    ("runs, scheduled today", "/admin/tasks/run/?scheduled_at__gte={today}+00:00:00%2B00:00"),
    ("runs, one task", "/admin/tasks/run/?task__id__exact={task}"),
    ("runs, search by task name", "/admin/tasks/run/?q=bench+task+7"),
    ("runs, search by run id", "/admin/tasks/run/?q={run}"),
    ("run detail", "/admin/tasks/run/{run}/change/"),
    ("tasks, no filter", "/admin/tasks/task/"),
    ("tasks, status=paused", "/admin/tasks/task/?status__exact=paused"),
    ("tasks, one owner", "/admin/tasks/task/?owner={owner}"),
    ("dashboard", "/admin/dashboard/"),
]


def populate(runs: int) -> None:
    user, _ = get_user_model().objects.get_or_create(
        username="bench", is_staff=True, is_superuser=True
    )
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM tasks_task")
        if cursor.fetchone()[0] < 1000:
            cursor.execute(_TASKS_SQL, {"owner": user.pk})
        cursor.execute("SELECT reltuples FROM pg_class WHERE relname = 'tasks_run'")
        if cursor.fetchone()[0] < runs * 0.9:
            started = time.monotonic()
            cursor.execute(_RUNS_SQL, {"runs": runs, "owner": user.pk})
            print(f"inserted {runs} runs in {time.monotonic() - started:.1f} s")
        cursor.execute("ANALYZE tasks_task")
        cursor.execute("ANALYZE tasks_run")


def measure(repeat: int) -> None:
    with override_settings(ALLOWED_HOSTS=[*settings.ALLOWED_HOSTS, "testserver"]):
        _measure(repeat)


def _measure(repeat: int) -> None:
    client = Client()
    client.force_login(get_user_model().objects.get(username="bench"))
    run = Run.objects.order_by("-id").only("id").first()
    task = Task.objects.order_by("id").only("id").first()
    today = time.strftime("%Y-%m-%d")
    print(f"{'page':34} {'median ms':>9} {'max ms':>7} {'queries':>7}")
    for label, url in URLS:
        url = url.format(run=run.pk, task=task.pk, today=today, owner=task.owner_id)
        timings = []
        for _ in range(repeat):
            with CaptureQueriesContext(connection) as queries:
                started = time.perf_counter()
                response = client.get(url)
                timings.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200, (url, response.status_code)
        print(f"{label:34} {statistics.median(timings):9.1f} {max(timings):7.1f} {len(queries):7d}")
