"""Pickup while an old transaction holds back vacuum (`python -m bench held_snapshot`).

Two worker processes (`runworker --concurrency 1` each, no scheduler: the runs are one-time
runs inserted `scheduled` and due at once, as `data.enqueue_due` stores them) take runs fed at a
fixed rate (`--rate`, 120 a second) for `--seconds` (600). With `--hold`, a separate connection
keeps `BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1 FROM tasks_run LIMIT 1` open for the
whole window: its snapshot keeps every row version written since from being vacuumed (or
hinted dead in the indexes), so the dead versions of the runs claimed and finished since pile
up. The harness runs `VACUUM ANALYZE` every `VACUUM_SECONDS`, as autovacuum would (it is off on
this machine's PostgreSQL). Pickup is `started_at - scheduled_at` of each run, as the claim
recorded them (the claim writes `started_at`), grouped by the minute its run was due, and
overall; the floor is a sleeping thread's wake-up lateness over the same window
(bench/timer_floor.py).
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

import psycopg
from django.db import connection

from bench import data, proc, workload
from bench.timer_floor import TimerFloor, pct

VACUUM_SECONDS = 30.0
DRAIN_SECONDS = 60.0  # after the window, for the last runs to be claimed
FEED_STEP = 0.05
HOLD_SQL = "SELECT 1 FROM tasks_run LIMIT 1"


def pickup_figures(rows: list[tuple[datetime, datetime | None]], *, t0: float) -> dict:
    """Pickup of (scheduled_at, started_at) pairs: per minute since `t0` (epoch seconds) of the
    run's due time, and overall; p50/p99/max in ms, and the runs never started."""
    late: dict[int, list[float]] = {}
    unstarted = 0
    for scheduled, started in rows:
        if started is None:
            unstarted += 1
            continue
        minute = max(0, int((scheduled.timestamp() - t0) // 60))
        late.setdefault(minute, []).append((started - scheduled).total_seconds() * 1000)
    every = sorted(ms for values in late.values() for ms in values)
    return {
        "per_minute": [{"minute": m, **_stats(sorted(late[m]))} for m in sorted(late)],
        "overall": _stats(every),
        "unstarted": unstarted,
    }


def _stats(values: list[float]) -> dict:
    return {
        "runs": len(values),
        "p50_ms": pct(values, 50),
        "p99_ms": pct(values, 99),
        "max_ms": round(values[-1], 1) if values else 0.0,
    }


class Vacuum(threading.Thread):
    """VACUUM ANALYZE of the queue's tables every VACUUM_SECONDS, on a connection of its own."""

    def __init__(self, url: str) -> None:
        super().__init__(name="vacuum", daemon=True)
        self.url, self.stopping, self.seconds = url, threading.Event(), []

    def run(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as db:
            while not self.stopping.wait(VACUUM_SECONDS):
                took = time.monotonic()
                db.execute("VACUUM ANALYZE tasks_run")
                db.execute("VACUUM ANALYZE tasks_task")
                self.seconds.append(round(time.monotonic() - took, 2))


def _dead_tuples(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as db:
        row = db.execute(
            "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'tasks_run'"
        ).fetchone()
    return int(row[0]) if row else 0


def measure(
    *,
    database_url: str,
    seconds: float,
    rate: float,
    hold: bool,
    emit: Callable[[dict], None],
    write: Callable[[str], None],
) -> dict:
    """One window: feed, hold (or not), measure; returns the figures (also emitted)."""
    workload.reset_queue()
    run_dir = tempfile.mkdtemp(prefix="bench-held-snapshot-")
    fleet = workload.Fleet(run_dir, workload.fleet_env(run_dir, database_url))
    owner = workload.bench_owner().pk
    holder = psycopg.connect(database_url)  # not autocommit: the transaction stays open
    vacuum, floor = Vacuum(database_url), TimerFloor()
    fed = 0
    try:
        for _ in range(2):
            fleet.start("runworker", "--concurrency", "1")
        data.enqueue_due(owner, 2)  # warm-up: both workers up and idle before the window
        limit = time.monotonic() + 60
        while _unfinished() and time.monotonic() < limit:
            time.sleep(0.1)
        if hold:
            holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            holder.execute(HOLD_SQL).fetchall()
        t0, started = time.time(), time.monotonic()
        vacuum.start()
        floor.start()
        while (elapsed := time.monotonic() - started) < seconds:
            due = int(rate * elapsed)
            if due > fed:
                data.enqueue_due(owner, due - fed)
                fed = due
            time.sleep(FEED_STEP)
        floor.stopping.set()
        drain = time.monotonic() + DRAIN_SECONDS
        while _unfinished() and time.monotonic() < drain:
            time.sleep(0.5)
        dead = _dead_tuples(database_url)
    finally:
        vacuum.stopping.set()
        holder.close()
        fleet.stop()
        shutil.rmtree(run_dir, ignore_errors=True)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT scheduled_at, started_at FROM tasks_run WHERE scheduled_at >= %s",
            [datetime.fromtimestamp(t0, UTC)],
        )
        rows = cursor.fetchall()
    figures = pickup_figures(rows, t0=t0)
    result = {
        "workload": "held_snapshot",
        "hold": hold,
        "seconds": seconds,
        "rate": rate,
        "fed": fed,
        **figures,
        "dead_tuples_at_end": dead,
        "vacuum_seconds": vacuum.seconds,
        "floor": floor.figures(),
        "machine": proc.machine(),
    }
    emit(result)
    write(
        f"{'held' if hold else 'no hold':<8} {'minute':>6} {'runs':>6} {'p50 ms':>8} "
        f"{'p99 ms':>8} {'max ms':>8}"
    )
    for row in [*figures["per_minute"], {"minute": "all", **figures["overall"]}]:
        write(
            f"{'':<8} {row['minute']:>6} {row['runs']:>6} {row['p50_ms']:>8} "
            f"{row['p99_ms']:>8} {row['max_ms']:>8}"
        )
    write(
        f"floor (a sleeping thread, same window): p99 {result['floor']['p99_ms']} ms, "
        f"max {result['floor']['max_ms']} ms; unstarted {figures['unstarted']}"
    )
    return result


def _unfinished() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM tasks_run WHERE status <> 'succeeded'")
        return int(cursor.fetchone()[0])
