"""Time the admin changelists over a million runs (docs/operations.md, "Admin at scale").

Run against a scratch database, never a real one (it inserts a million rows):

    createdb -h 127.0.0.1 -U postgres scheduler_bench
    export DATABASE_URL=postgres://postgres@127.0.0.1:5432/scheduler_bench
    export SECRET_KEY=bench-only-secret-key-0123456789abcdef
    .venv/bin/python manage.py migrate -v 0
    .venv/bin/python tests/ops/bench_admin.py --runs 1000000
    dropdb -h 127.0.0.1 -U postgres scheduler_bench
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_project.settings")
os.environ.setdefault("ALLOWED_HOSTS", "testserver")

import django

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

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
    user, _ = get_user_model().objects.get_or_create(username="bench", is_staff=True,
                                                     is_superuser=True)  # fmt: skip
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
    from tasks.models import Run, Task

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
        print(f"{label:34} {statistics.median(timings):9.1f} {max(timings):7.1f} "
              f"{len(queries):7d}")  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    populate(args.runs)
    measure(args.repeat)
