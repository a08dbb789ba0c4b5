"""Start lateness of a mix of recurring tasks under several schedulers.

N `runscheduler` and M `runworker --concurrency C` processes are started and idle; then
interval tasks (every 2 s, no `start_at`: the first occurrence is 1-2 s after creation) and
six-field crons are created one by one over `spread` seconds through the API's service
(validation, inline planning, NOTIFY), as clients would. For `seconds`, every occurrence is
checked: lateness `started_at - scheduled_at` on the database clock, early starts, missing
occurrences (fire times without a run) and duplicates (the `bench` handler writes one line per
execution). The floor is measured in the same run (bench/timer_floor.py).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections import Counter
from datetime import timedelta
from itertools import takewhile
from pathlib import Path

from django.db import connection

from bench.handlers import read_lines
from bench.proc import cpu_seconds
from bench.timer_floor import TimerFloor, pct
from bench.workload import Fleet, bench_owner, fleet_env, reset_queue
from tasks import schedules
from tasks.db import db_now
from tasks.models import Process, Run
from tasks.transitions import creation


def measure(
    *,
    database_url: str,
    schedulers: int = 3,
    workers: int = 2,
    concurrency: int = 4,
    intervals: int = 20,
    every: int = 2,
    crons: int = 10,
    cron: str = "*/3 * * * * *",
    seconds: float = 60.0,
    spread: float = 5.0,
) -> dict:
    """Run the mix on `database_url` (migrated, the current connection); figures in ms."""
    reset_queue()
    run_dir = tempfile.mkdtemp(prefix="bench-mix-")
    fleet = Fleet(run_dir, fleet_env(run_dir, database_url))
    floor = TimerFloor()
    try:
        for _ in range(schedulers):
            fleet.start("runscheduler")
        for _ in range(workers):
            fleet.start("runworker", "--concurrency", str(concurrency))
        boot = time.monotonic() + 120
        while Process.objects.filter(stopped_at=None).count() < schedulers + workers:
            if time.monotonic() > boot or any(p.poll() is not None for p in fleet.procs):
                raise RuntimeError(f"the fleet did not start; see {run_dir}/stderr.txt")
            time.sleep(0.2)
        time.sleep(2.0)  # every process past its first pass: idle, as in production
        floor.start()
        owner = bench_owner()
        began = time.monotonic()
        interval = {"type": "interval", "every": every}
        if every == 1:
            interval["allow_every_second"] = True
        raws = [interval] * intervals
        raws += [{"type": "cron", "expression": cron, "allow_every_second": True}] * crons
        created = []
        # One by one, as clients create tasks, each through the API's service, spread over
        # `spread` seconds: first occurrences come due while earlier tasks already run.
        raws = [raws[i] for i in sorted(range(len(raws)), key=lambda i: (i * 7) % len(raws))]
        for i, raw in enumerate(raws):
            time.sleep(max(0.0, i * spread / len(raws) - (time.monotonic() - began)))
            now = db_now()
            data = {
                "kind": "handler",
                "payload": {"name": "bench", "args": {}},
                "schedule": schedules.normalize(raw, now=now),
            }
            created.append(creation.create_task(owner=owner, data=data, now=now)[0])
        end = db_now() + timedelta(seconds=seconds)
        while db_now() < end + timedelta(seconds=2):
            time.sleep(0.5)
        floor.stopping.set()
        window = Run.objects.filter(scheduled_at__lte=end)
        drain = time.monotonic() + 30
        while window.exclude(status="succeeded").exists() and time.monotonic() < drain:
            time.sleep(0.5)
        cpu = {
            "schedulers": round(sum(cpu_seconds(p.pid) for p in fleet.procs[:schedulers]), 1),
            "workers": round(sum(cpu_seconds(p.pid) for p in fleet.procs[schedulers:]), 1),
        }
    finally:
        floor.stopping.set()
        fleet.stop()
    return _figures(created, window, end, run_dir, cpu, floor) | {
        "schedulers": schedulers,
        "workers": workers,
        "concurrency": concurrency,
        "intervals": intervals,
        "every": every,
        "crons": crons,
        "cron": cron,
        "seconds": seconds,
        "spread": spread,
    }


def _figures(created: list, window, end, run_dir: str, cpu: dict, floor: TimerFloor) -> dict:
    runs = list(window.values_list("task_id", "scheduled_at", "started_at", "worker"))
    with connection.cursor() as cursor:  # lock waits PostgreSQL broke up (deadlock_timeout)
        cursor.execute("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        deadlocks = cursor.fetchone()[0]
    stderr = Path(run_dir, "stderr.txt")
    errors = stderr.read_text().count("failed") if stderr.exists() else 0
    expected = sum(
        len(list(takewhile(lambda at: at <= end, schedules.fire_times(t.schedule, after=None))))
        for t in created
    )
    started = [(s, st, w) for _, s, st, w in runs if st is not None]
    late = sorted((st - s).total_seconds() * 1000 for s, st, _ in started)
    lines = read_lines(run_dir)
    shutil.rmtree(run_dir, ignore_errors=True)
    executed = Counter(key for key, _, _ in lines)
    body = sorted((b - s) * 1000 for _, s, b in lines if s <= end.timestamp())
    worst = sorted(started, key=lambda r: r[1] - r[0])[-5:]
    # Runs due at the same instant (a burst): how many the busiest worker took, on average.
    bursts: dict[object, Counter] = {}
    for scheduled, _, worker in started:
        bursts.setdefault(scheduled, Counter())[worker] += 1
    big = [c for c in bursts.values() if sum(c.values()) >= 10]
    share = sum(max(c.values()) / sum(c.values()) for c in big) / len(big) if big else 0.0
    return {
        "workload": "mix",
        "occurrences": expected,
        "runs": len(runs),
        "missing": expected - len({(t, s) for t, s, _, _ in runs}),
        "not_succeeded": window.exclude(status="succeeded").count(),
        "duplicates": sum(n - 1 for n in executed.values() if n > 1),
        "p50_ms": pct(late, 50),
        "p99_ms": pct(late, 99),
        "max_ms": round(late[-1], 1) if late else 0.0,
        "early": sum(1 for ms in late if ms < 0),
        "body_early": sum(1 for ms in body if ms < 0),
        "body_p99_ms": pct(body, 99),
        "body_max_ms": round(body[-1], 1) if body else 0.0,
        "floor": floor.figures(),
        "deadlocks": deadlocks,
        "fleet_failures_logged": errors,
        "burst_busiest_worker_share": round(share, 2),
        "worst": [
            [s.isoformat(), round((st - s).total_seconds() * 1000, 1), w]
            for s, st, w in reversed(worst)
        ],
        "cpu_seconds": cpu,
    }
