"""Start lateness of recurring tasks with idle workers: real schedulers and workers.

`N` recurring tasks (intervals of 1-3 s and six-field crons with seconds) begin at T0; the
schedulers plan them and the workers run them for `seconds`. Lateness is `started_at -
scheduled_at` of every occurrence in the window, both on the database clock. The same pass
counts missing occurrences (fire_times against the runs) and occurrences executed twice (the
`bench` handler writes one line per start).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from itertools import takewhile
from pathlib import Path
from typing import IO

from django.contrib.auth import get_user_model
from django.db import connection

from bench.handlers import read_lines
from bench.proc import cpu_seconds
from bench.timer_floor import pct
from tasks import schedules
from tasks.db import TASK_CHANGED_CHANNEL, db_now, notify
from tasks.models import Process, Run, Task

ROOT = Path(__file__).resolve().parents[1]
INTERVALS = (1, 2, 3)
CRONS = (
    "* * * * * *",
    "*/2 * * * * *",
    "*/3 * * * * *",
    "1-59/2 * * * * *",
    "*/4 * * * * *",
    "*/5 * * * * *",
    "0,15,30,45 * * * * *",
    "10-50/10 * * * * *",
)
LEAD_SECONDS = 3.0  # from creating the tasks (the fleet is up and idle) to T0


def mixed_schedules(count: int, *, t0: datetime) -> list[dict]:
    """Raw schedules: 60 % intervals (phases spread over the second), 40 % six-field crons."""
    raws: list[dict] = []
    for i in range(count):
        if i % 5 < 3:
            start = t0 + timedelta(milliseconds=(i * 37) % 1000)
            every = INTERVALS[i % 3]
            raw = {"type": "interval", "every": every, "start_at": _iso(start)}
            raws.append({**raw, "allow_every_second": True} if every == 1 else raw)
        else:
            cron = {"type": "cron", "expression": CRONS[i % len(CRONS)], "start_at": _iso(t0)}
            raws.append({**cron, "allow_every_second": True})
    return raws


def create_tasks(raws: list[dict], *, now: datetime) -> list[Task]:
    """Store the tasks without planning anything: the schedulers plan every occurrence."""
    owner, _ = get_user_model().objects.get_or_create(username="bench")
    tasks = []
    for raw in raws:
        schedule = schedules.normalize(raw, now=now)
        tasks.append(
            Task(
                owner=owner,
                kind="handler",
                payload={"name": "bench", "args": {}},
                schedule=schedule,
                schedule_type=schedule["type"],
                next_unplanned_at=next(iter(schedules.fire_times(schedule, after=None))),
            )
        )
    return Task.objects.bulk_create(tasks)


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _start(args: list[str], env: dict[str, str], log: IO[bytes]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), *args], env=env, stdout=log, stderr=log
    )


def _stop(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def measure(
    *,
    database_url: str,
    tasks: int,
    seconds: float,
    schedulers: int = 3,
    workers: int = 3,
    concurrency: int = 4,
    lookahead: float | None = None,
    log_level: str = "WARNING",
) -> dict:
    """Run the workload on `database_url` (already migrated, the current connection); return
    the figures as a dict (milliseconds)."""
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE tasks_attempt, tasks_run, tasks_task, tasks_process CASCADE")
    run_dir = Path(tempfile.mkdtemp(prefix="lateness-"))
    env = dict(os.environ)
    env.update(
        DATABASE_URL=database_url,
        SCHEDULER_HANDLER_MODULES="bench.handlers",
        BENCH_RUN_DIR=str(run_dir),
        LOG_LEVEL=log_level,
        PYTHONUNBUFFERED="1",
    )
    if lookahead is not None:
        env["TASKS_LOOKAHEAD_SECONDS"] = str(lookahead)
    log_path = run_dir.parent / f"{run_dir.name}.log"  # the fleet's output, kept for a look
    log = log_path.open("ab")
    procs = [_start(["runscheduler"], env, log) for _ in range(schedulers)]
    procs += [
        _start(["runworker", "--concurrency", str(concurrency)], env, log) for _ in range(workers)
    ]
    try:
        # Idle workers: the window opens once every process is up (its heartbeat row exists).
        boot = time.monotonic() + 120
        while Process.objects.filter(stopped_at=None).count() < len(procs):
            if time.monotonic() > boot or any(p.poll() is not None for p in procs):
                raise RuntimeError(f"the fleet did not start; see {log_path}")
            time.sleep(0.2)
        t0 = db_now().replace(microsecond=0) + timedelta(seconds=LEAD_SECONDS)
        end = t0 + timedelta(seconds=seconds)
        created = create_tasks(mixed_schedules(tasks, t0=t0), now=db_now())
        notify(TASK_CHANGED_CHANNEL)  # as the API does: schedulers wake at once
        while db_now() < end + timedelta(seconds=2):
            time.sleep(0.5)
        window = Run.objects.filter(scheduled_at__lte=end)
        drain = time.monotonic() + 30
        while window.exclude(status="succeeded").exists() and time.monotonic() < drain:
            time.sleep(0.5)
        cpu = {
            role: round(sum(cpu_seconds(p.pid) for p in procs[a:b]), 1)
            for role, a, b in (("schedulers", 0, schedulers), ("workers", schedulers, None))
        }
    finally:
        _stop(procs)
        log.close()
    runs = list(window.filter(started_at__isnull=False).values_list("scheduled_at", "started_at"))
    expected = sum(
        len(list(takewhile(lambda at: at <= end, schedules.fire_times(t.schedule, after=None))))
        for t in created
    )
    late = sorted((started - scheduled).total_seconds() * 1000 for scheduled, started in runs)
    lines = read_lines(str(run_dir))
    shutil.rmtree(run_dir, ignore_errors=True)
    executed = Counter(key for key, _, _ in lines)
    # Cross-check on the host clock: when the handler body really began (time.time()).
    body = sorted(
        (start - scheduled) * 1000 for _, scheduled, start in lines if scheduled <= end.timestamp()
    )

    return {
        "workload": "recurring lateness",
        "tasks": tasks,
        "seconds": seconds,
        "schedulers": schedulers,
        "workers": workers,
        "concurrency": concurrency,
        "lookahead": lookahead,
        "occurrences": expected,
        "started": len(late),
        "missing": expected - window.count(),
        "not_succeeded": window.exclude(status="succeeded").count(),
        "ran_twice": sum(1 for n in executed.values() if n > 1),
        "p50_ms": pct(late, 50),
        "p95_ms": pct(late, 95),
        "p99_ms": pct(late, 99),
        "max_ms": round(late[-1], 1) if late else 0.0,
        "min_ms": round(late[0], 1) if late else 0.0,
        "early": sum(1 for ms in late if ms < 0),
        "body_p50_ms": pct(body, 50),
        "body_p99_ms": pct(body, 99),
        "body_max_ms": round(body[-1], 1) if body else 0.0,
        "body_early": sum(1 for ms in body if ms < 0),
        "cpu_seconds": cpu,
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
