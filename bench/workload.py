"""Throughput and lateness (docs/benchmarks.md) with our real role processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.contrib.auth import get_user_model
from django.db import connection

from bench.handlers import read_lines
from bench.proc import percentile
from bench.timer_floor import TimerFloor
from tasks import schedules
from tasks.transitions.creation import MAX_BATCH, create_tasks

ROOT = Path(__file__).resolve().parents[1]
TABLES = "tasks_attempt, tasks_run, tasks_task, tasks_process"


def analyze_queue() -> None:
    """Fresh statistics after enqueueing (as the raw limit's setup does after its inserts)."""
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE tasks_run")
        cursor.execute("VACUUM ANALYZE tasks_task")


def reset_queue() -> None:
    """Empty the queue tables, then VACUUM ANALYZE and CHECKPOINT, so every round starts alike."""
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {TABLES} CASCADE")
        cursor.execute("VACUUM ANALYZE tasks_run")
        cursor.execute("VACUUM ANALYZE tasks_task")
        cursor.execute("CHECKPOINT")


def bench_owner():
    user, _ = get_user_model().objects.get_or_create(username="bench")
    return user


def enqueue(run_at: list[datetime], *, now: datetime, key_limit: int | None = None) -> float:
    """Create one one-time `bench` task per time, through the batch service; returns seconds.
    With `key_limit`, every task names the concurrency key `bench` with that limit."""
    owner = bench_owner()
    started = time.monotonic()
    for offset in range(0, len(run_at), MAX_BATCH):
        items = [
            {
                "kind": "handler",
                "payload": {"name": "bench", "args": {}},
                "schedule": schedules.normalize({"type": "once", "run_at": _iso(at)}, now=now),
                "priority": 5,
                **({"concurrency": {"key": "bench", "limit": key_limit}} if key_limit else {}),
            }
            for at in run_at[offset : offset + MAX_BATCH]
        ]
        create_tasks(owner=owner, items=items, now=now)
    return time.monotonic() - started


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


@dataclass
class Fleet:
    """Worker (and scheduler) processes started with the documented commands."""

    run_dir: str
    env: dict[str, str]
    procs: list[subprocess.Popen] = field(default_factory=list)

    def start(self, *args: str) -> None:
        self.procs.append(
            subprocess.Popen(
                [sys.executable, str(ROOT / "manage.py"), *args],
                env=self.env,
                stdout=subprocess.DEVNULL,
                stderr=open(os.path.join(self.run_dir, "stderr.txt"), "ab"),
            )
        )

    def rss_mb(self) -> list[float]:
        sizes = []
        for proc in self.procs:
            try:
                status = Path(f"/proc/{proc.pid}/status").read_text()
            except OSError:
                continue
            for line in status.splitlines():
                if line.startswith("VmRSS:"):
                    sizes.append(round(int(line.split()[1]) / 1024, 1))
        return sizes

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def layout(workers: int, processes: int | None) -> tuple[int, int]:
    """W executing slots as (processes, concurrency each): by default one process per core.

    Measured on 2 cores (docs/benchmarks.md): a worker process alternates between Python and
    waiting for its statement, so a second process keeps both cores busy; more processes than
    cores only add contention.
    """
    procs = processes or min(workers, os.cpu_count() or 1)
    procs = max(1, min(procs, workers))
    return procs, max(1, workers // procs)


def fleet_env(run_dir: str, database_url: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=database_url,
        SCHEDULER_HANDLER_MODULES="bench.handlers",
        BENCH_RUN_DIR=run_dir,
        LOG_LEVEL="WARNING",
        PYTHONUNBUFFERED="1",
    )
    return env


def _db_counts() -> tuple[int, int, datetime | None, datetime | None]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FILTER (WHERE status = 'succeeded'), "
            "(SELECT count(*) FROM tasks_attempt WHERE outcome = 'succeeded'), "
            "min(started_at), max(finished_at) FROM tasks_run"
        )
        return cursor.fetchone()


def throughput(
    *,
    database_url: str,
    workers: int,
    n: int,
    processes: int | None = None,
    worker_flags: Sequence[str] = (),
    key_limit: int | None = None,
) -> dict:
    """N no-op runs due now, then W slots; rate = completed / (last completion - first start).
    `worker_flags` go to every runworker (e.g. --cpu 64 --memory 256Gi: a declared capacity);
    with `key_limit`, every run carries one concurrency key of that limit."""
    reset_queue()
    now = datetime.now(UTC)
    enqueue_seconds = enqueue([now] * n, now=now, key_limit=key_limit)
    analyze_queue()
    run_dir = tempfile.mkdtemp(prefix="bench-throughput-")
    procs, concurrency = layout(workers, processes)
    fleet = Fleet(run_dir, fleet_env(run_dir, database_url))
    launched = time.time()
    try:
        rss = _wait_for_completion(fleet, run_dir, procs, concurrency, n, launched, worker_flags)
    finally:
        fleet.stop()
    lines = read_lines(run_dir)
    succeeded, attempts, _, last_finish = _db_counts()
    first_start = min(start for _, _, start in lines) if lines else launched
    keys = {key for key, _, _ in lines}
    elapsed = (last_finish.timestamp() - first_start) if last_finish else float("nan")
    return {
        "workload": "throughput",
        "workers": workers,
        "processes": procs,
        "concurrency": concurrency,
        "worker_flags": " ".join(worker_flags),
        "key_limit": key_limit,
        "n": n,
        "succeeded": succeeded,
        "attempts_recorded": attempts,
        "bodies": len(lines),
        "ran_twice": len(lines) - len(keys),
        "enqueue_seconds": round(enqueue_seconds, 3),
        "boot_seconds": round(first_start - launched, 3),
        "seconds": round(elapsed, 3),
        "rate": round(min(succeeded, len(lines)) / elapsed, 1) if elapsed > 0 else 0.0,
        "worker_rss_mb": rss,
    }


def _wait_for_completion(
    fleet: Fleet,
    run_dir: str,
    procs: int,
    concurrency: int,
    n: int,
    launched: float,
    worker_flags: Sequence[str] = (),
) -> list[float]:
    """Start the workers; return their RSS once N runs are done (or 20 s after the first start)."""
    for _ in range(procs):
        fleet.start("runworker", "--concurrency", str(concurrency), *worker_flags)
    rss: list[float] = []
    deadline = None
    while True:
        time.sleep(0.1)
        lines = read_lines(run_dir)
        if lines and deadline is None:
            deadline = time.monotonic() + 20.0
        succeeded, attempts, _, _ = _db_counts()
        if succeeded >= n and attempts >= n:
            return fleet.rss_mb() or rss
        if deadline is not None and time.monotonic() > deadline:
            return rss
        if deadline is None and time.time() - launched > 60:
            return rss
        rss = fleet.rss_mb() or rss


def lateness(*, database_url: str, workers: int, jobs: int, window: float) -> dict:
    """W idle executors; `jobs` one-time tasks due evenly over `window` seconds from T0."""
    reset_queue()
    run_dir = tempfile.mkdtemp(prefix="bench-lateness-")
    procs, concurrency = layout(workers, None)
    fleet = Fleet(run_dir, fleet_env(run_dir, database_url))
    try:
        return _measure_lateness(fleet, run_dir, procs, concurrency, jobs, window, workers)
    finally:
        fleet.stop()


def _measure_lateness(
    fleet: Fleet,
    run_dir: str,
    procs: int,
    concurrency: int,
    jobs: int,
    window: float,
    workers: int,
) -> dict:
    fleet.start("runscheduler")
    for _ in range(procs):
        fleet.start("runworker", "--concurrency", str(concurrency))
    # Warm-up: one job through the whole path, so every executor is up and idle at T0.
    enqueue([datetime.now(UTC)], now=datetime.now(UTC))
    limit = time.monotonic() + 60
    while len(read_lines(run_dir)) < 1 and time.monotonic() < limit:
        time.sleep(0.1)
    now = datetime.now(UTC)
    t0 = now + timedelta(seconds=5)
    due = [t0 + timedelta(seconds=i * window / jobs) for i in range(jobs)]
    enqueue_seconds = enqueue(due, now=now)
    assert datetime.now(UTC) < t0, "enqueueing took longer than the lead time"
    end = time.monotonic() + (t0 - datetime.now(UTC)).total_seconds() + window + 10
    floor = TimerFloor()  # the machine's own wake-up lateness over the same window
    floor.start()
    while time.monotonic() < end and len(read_lines(run_dir)) < jobs + 1:
        time.sleep(0.5)
    floor.stopping.set()
    rss = fleet.rss_mb()
    # The warm-up job's line stays in its file (the worker keeps the file open): leave it out.
    lines = [line for line in read_lines(run_dir) if line[1] >= t0.timestamp() - 1e-3]
    late = sorted((start - scheduled) * 1000 for _, scheduled, start in lines)
    keys = {key for key, _, _ in lines}

    def pct(p: float) -> float:
        return round(percentile(late, p), 2)

    return {
        "workload": "lateness",
        "workers": workers,
        "processes": procs,
        "concurrency": concurrency,
        "jobs": jobs,
        "window_seconds": window,
        "enqueue_seconds": round(enqueue_seconds, 3),
        "p50_ms": pct(50),
        "p95_ms": pct(95),
        "p99_ms": pct(99),
        "max_ms": round(late[-1], 2) if late else 0.0,
        "min_ms": round(late[0], 2) if late else 0.0,
        "early": sum(1 for ms in late if ms < 0),
        "missing": jobs - len(keys),
        "ran_twice": len(lines) - len(keys),
        "worker_rss_mb": rss,
        "floor": floor.figures(),
    }
