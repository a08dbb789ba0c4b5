"""Scheduler at scale: 100,000 active recurring tasks, 1 then 2 schedulers.

Half the tasks are minute-level crons (`*/1` ... `*/15 * * * *`), half intervals of 60-300 s with
start times spread over their period. No worker runs: planned runs simply wait. Every few seconds
the harness samples how many occurrences have been materialised and the scheduler's lag, `now -
min(next_unplanned_at)` over active tasks: positive means an occurrence is due and still unplanned.
It must stay flat (bounded), not grow.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from itertools import pairwise

from django.conf import settings
from django.db import connection

from bench import proc
from bench.workload import Fleet, bench_owner, fleet_env
from tasks import schedules
from tasks.models import Task

CRONS = ("*/1 * * * *", "*/2 * * * *", "*/5 * * * *", "*/10 * * * *", "*/15 * * * *")
INTERVALS = (60, 120, 180, 240, 300)
SAMPLE_SECONDS = 5.0
LEAD_SECONDS = 45.0


def _raw(i: int, t0: datetime) -> dict:
    if i % 2 == 0:
        return {"type": "cron", "expression": CRONS[(i // 2) % len(CRONS)]}
    every = INTERVALS[(i // 2) % len(INTERVALS)]
    start = t0 + timedelta(seconds=(i * 7919) % (every * 1000) / 1000)  # spread over the period
    return {
        "type": "interval",
        "every": every,
        "start_at": start.isoformat().replace("+00:00", "Z"),
    }


def demand_per_second(count: int) -> float:
    """Occurrences per second the mix asks for on average."""
    per_minute = {"*/1": 1, "*/2": 1 / 2, "*/5": 1 / 5, "*/10": 1 / 10, "*/15": 1 / 15}
    total = 0.0
    for i in range(count):
        if i % 2 == 0:
            total += per_minute[CRONS[(i // 2) % len(CRONS)].split()[0]] / 60
        else:
            total += 1 / INTERVALS[(i // 2) % len(INTERVALS)]
    return total


def create(count: int, *, batch: int = 5000) -> float:
    """Store `count` active tasks without planning anything; returns seconds."""
    started = time.monotonic()
    owner = bench_owner()
    # First occurrences from T0, past the time creating the tasks takes, so that none is overdue
    # when the schedulers start: crons are anchored there, intervals start over their period.
    t0 = datetime.now(UTC) + timedelta(seconds=LEAD_SECONDS)
    cache: dict[str, dict] = {}
    for offset in range(0, count, batch):
        tasks = []
        for i in range(offset, min(count, offset + batch)):
            raw = _raw(i, t0)
            key = raw.get("expression", "")
            schedule = dict(cache[key]) if key in cache else schedules.normalize(raw, now=t0)
            if key:
                cache.setdefault(key, dict(schedule))
            tasks.append(
                Task(
                    owner=owner,
                    name=f"scale {i}",
                    kind="handler",
                    payload={"name": "bench", "args": {}},
                    schedule=schedule,
                    schedule_type=schedule["type"],
                    priority=i % 10,
                    next_unplanned_at=next(iter(schedules.fire_times(schedule, after=None))),
                )
            )
        Task.objects.bulk_create(tasks)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE tasks_task")
    return time.monotonic() - started


def _sample() -> tuple[int, int, float | None]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT count(*) FROM tasks_run),"
            " (SELECT count(*) FROM tasks_run WHERE status = 'skipped'),"
            " (SELECT extract(epoch FROM clock_timestamp() - min(next_unplanned_at))::float8"
            "    FROM tasks_task WHERE status = 'active' AND next_unplanned_at IS NOT NULL)"
        )
        return cursor.fetchone()


def run_once(*, database_url: str, tasks: int, seconds: float, schedulers: int) -> dict:
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE tasks_attempt, tasks_run, tasks_task, tasks_process CASCADE")
    create_seconds = create(tasks)
    run_dir = tempfile.mkdtemp(prefix="bench-scale-")
    fleet = Fleet(run_dir, fleet_env(run_dir, database_url))
    samples: list[dict] = []
    try:
        for _ in range(schedulers):
            fleet.start("runscheduler")
        started = time.monotonic()
        while time.monotonic() - started < seconds:
            time.sleep(SAMPLE_SECONDS - (time.monotonic() - started) % SAMPLE_SECONDS)
            runs, skipped, lag = _sample()
            pids = [p.pid for p in fleet.procs]
            samples.append(
                {
                    "t": round(time.monotonic() - started, 1),
                    "runs": runs,
                    "skipped": skipped,
                    "lag_s": round(lag, 2) if lag is not None else None,
                    "cpu_s": round(sum(proc.cpu_seconds(pid) for pid in pids), 1),
                    "rss_mb": [proc.rss_mb(pid) for pid in pids],
                }
            )
    finally:
        fleet.stop()
    shutil.rmtree(run_dir, ignore_errors=True)
    return _summarise(
        samples, tasks=tasks, seconds=seconds, schedulers=schedulers, create_seconds=create_seconds
    )


def _summarise(samples: list[dict], **info: float) -> dict:
    rates = [(b["runs"] - a["runs"]) / (b["t"] - a["t"]) for a, b in pairwise(samples)]
    half = samples[len(samples) // 2 :]
    lags = [s["lag_s"] for s in samples if s["lag_s"] is not None]
    last = samples[-1] if samples else {"runs": 0, "t": 1, "cpu_s": 0, "skipped": 0}
    second_half = None
    if len(half) > 1:
        second_half = (half[-1]["runs"] - half[0]["runs"]) / (half[-1]["t"] - half[0]["t"])
    cpu_ms = last["cpu_s"] * 1000 / last["runs"] if last["runs"] else 0.0
    return {
        "workload": "scheduler",
        **info,
        "lookahead_seconds": settings.TASKS_LOOKAHEAD_SECONDS,
        "demand_per_second": round(demand_per_second(int(info["tasks"])), 1),
        "materialised": last["runs"],
        "rate_mean": round(last["runs"] / last["t"], 1),
        "rate_peak": round(max(rates), 1) if rates else 0.0,
        "rate_second_half": round(second_half, 1) if second_half is not None else None,
        "skipped": last["skipped"],
        "lag_max_s": max(lags) if lags else None,
        "lag_end_s": lags[-1] if lags else None,
        "lag_slope_s_per_min_second_half": proc.slope_per_minute(
            [(s["t"], s["lag_s"]) for s in half if s["lag_s"] is not None]
        ),
        "scheduler_cpu_seconds": last["cpu_s"],
        "cpu_ms_per_occurrence": round(cpu_ms, 3),
        "samples": samples,
        "machine": proc.machine(),
    }


def measure(
    *,
    database_url: str,
    tasks: int,
    seconds: float,
    schedulers: list[int],
    emit: Callable[[dict], None],
    write: Callable[[str], None],
) -> list[dict]:
    results = []
    for count in schedulers:
        result = run_once(database_url=database_url, tasks=tasks, seconds=seconds, schedulers=count)
        emit(result)
        results.append(result)
        write(
            f"scheduler x{count}, {tasks:,} tasks, {seconds:g} s: {result['materialised']:,} "
            f"occurrences, mean {result['rate_mean']}/s, peak {result['rate_peak']}/s, "
            f"second half {result['rate_second_half']}/s "
            f"(demand {result['demand_per_second']}/s); lag max {result['lag_max_s']} s, "
            f"end {result['lag_end_s']} s, slope "
            f"{result['lag_slope_s_per_min_second_half']} s/min; skipped {result['skipped']}; "
            f"CPU {result['cpu_ms_per_occurrence']} ms/occurrence"
        )
        write("  t(s)   runs    lag(s)  skipped")
        for s in result["samples"]:
            write(f"  {s['t']:>5} {s['runs']:>7} {s['lag_s']:>8} {s['skipped']:>8}")
    return results
