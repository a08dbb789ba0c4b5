"""Memory: resident memory of every role process over a long run.

1. Soak: a scheduler and W executing slots (by default W worker processes of one slot; see
   --processes) run `runs` no-op runs fed evenly over `minutes` (one-time tasks due now,
   inserted with SQL in batches of 1,000, as the batch service stores them). Every 10 s the
   harness reads each process's VmRSS; per process it reports start, end, max and a
   least-squares slope (MB/min), also after the first minute (imports and caches warm up then).
   Target: a worker under 150 MB and flat. The harness runs VACUUM ANALYZE every minute, as
   autovacuum would (it is off on the CI machines' PostgreSQL).
2. API: gunicorn as the Dockerfile runs it, a task with `api_runs` finished runs; the workers'
   RSS before and after `api_requests` GET /api/v1/tasks/{id}/runs?page=N over random pages.
   List endpoints paginate at the database, so memory must not follow the history's size.
"""

from __future__ import annotations

import random
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from django.db import connection

from bench import apiserver, data, proc, workload
from bench.handlers import read_lines
from tasks.transitions.creation import MAX_BATCH

SAMPLE_SECONDS = 10.0
VACUUM_SECONDS = 60.0
TARGET_MB = 150.0


def _succeeded() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM tasks_run WHERE status = 'succeeded'")
        return cursor.fetchone()[0]


def _series(samples: list[tuple[float, float | None]]) -> dict:
    points = [(t, mb) for t, mb in samples if mb is not None]
    if not points:
        return {}
    steady = [(t, mb) for t, mb in points if t >= 60] or points
    return {
        "start_mb": points[0][1],
        "end_mb": points[-1][1],
        "max_mb": max(mb for _, mb in points),
        "slope_mb_per_min": proc.slope_per_minute(points),
        "slope_after_1_min_mb_per_min": proc.slope_per_minute(steady),
        "after_1_min_start_end_mb": [steady[0][1], steady[-1][1]],
    }


def run_soak(
    *, database_url: str, runs: int, minutes: float, workers: int, processes: int | None
) -> dict:
    """W slots in `processes` worker processes (by default W processes of one slot each)."""
    workload.reset_queue()
    run_dir = tempfile.mkdtemp(prefix="bench-soak-")
    procs, concurrency = workload.layout(workers, processes or workers)
    fleet = workload.Fleet(run_dir, workload.fleet_env(run_dir, database_url))
    duration = minutes * 60
    fed = 0
    rss: dict[str, list[tuple[float, float | None]]] = {}
    progress: list[tuple[float, int, int]] = []
    feed_seconds: list[float] = []  # per batch of 1,000: the feeder's own health
    vacuum_seconds: list[float] = []
    try:
        fleet.start("runscheduler")
        for _ in range(procs):
            fleet.start("runworker", "--concurrency", str(concurrency))
        owner = workload.bench_owner().pk
        names = ["scheduler"] + [f"worker {i + 1}" for i in range(procs)]
        started = time.monotonic()
        next_sample = started + SAMPLE_SECONDS  # once the processes are up
        next_vacuum = started + VACUUM_SECONDS
        while True:
            elapsed = time.monotonic() - started
            if elapsed >= duration + 60 or (fed >= runs and _succeeded() >= runs):
                break
            # Feed evenly: bring the total enqueued up to the share of the run elapsed so far,
            # with SQL (the batch service's Python would take a core from the workers).
            due = min(runs, int(runs * min(1.0, (elapsed + 1) / duration)))
            while fed < due and elapsed < duration:
                size = min(MAX_BATCH, due - fed)
                took = time.monotonic()
                data.enqueue_due(owner, size)
                feed_seconds.append(time.monotonic() - took)
                fed += size
            if time.monotonic() >= next_vacuum:
                # What autovacuum does in production (this machine's PostgreSQL runs with
                # autovacuum = off): without fresh statistics the feeder's cached foreign-key
                # check plans, made while the tables were empty, stay sequential scans.
                took = time.monotonic()
                data.vacuum_analyze()
                vacuum_seconds.append(time.monotonic() - took)
                next_vacuum += VACUUM_SECONDS
            if time.monotonic() >= next_sample:
                t = round(time.monotonic() - started, 1)
                for name, p in zip(names, fleet.procs, strict=True):
                    rss.setdefault(name, []).append((t, proc.rss_mb(p.pid)))
                progress.append((t, fed, _succeeded()))
                next_sample += SAMPLE_SECONDS
            time.sleep(0.5)
        elapsed = time.monotonic() - started
    finally:
        fleet.stop()
    lines = read_lines(run_dir)
    keys = {key for key, _, _ in lines}
    shutil.rmtree(run_dir, ignore_errors=True)
    per_process = {name: _series(samples) for name, samples in rss.items()}
    worker_series = [v for k, v in per_process.items() if k.startswith("worker")]
    return {
        "workload": "soak",
        "runs": runs,
        "minutes": minutes,
        "workers": workers,
        "processes": procs,
        "concurrency": concurrency,
        "fed": fed,
        "succeeded": _succeeded(),
        "bodies": len(lines),
        "ran_twice": len(lines) - len(keys),
        "seconds": round(elapsed, 1),
        "feed_batch_seconds_median_max": [
            round(sorted(feed_seconds)[len(feed_seconds) // 2], 3) if feed_seconds else None,
            round(max(feed_seconds), 3) if feed_seconds else None,
        ],
        "vacuum_analyze_runs_seconds": [round(v, 2) for v in vacuum_seconds],
        "rss": per_process,
        "worker_max_mb": max((s.get("max_mb", 0) for s in worker_series), default=None),
        "worker_under_target": all(s.get("max_mb", 0) < TARGET_MB for s in worker_series),
        "rss_samples": {name: samples for name, samples in rss.items()},
        "progress": progress,
        "machine": proc.machine(),
    }


def run_api_memory(
    *, database_url: str, api_runs: int, requests: int, api_workers: int | None
) -> dict:
    """gunicorn worker RSS before/after `requests` random pages of a `api_runs`-run history."""
    username = "bench-api-memory"
    owner = data.owner_id(username)
    started = time.monotonic()
    (task_id,) = data.insert_tasks(
        owner,
        1,
        raw_schedule={"type": "interval", "every": 60},
        next_unplanned_at=None,
        prefix="memory ",
    )
    data.insert_history(owner, api_runs, span=timedelta(seconds=api_runs * 60))
    data.vacuum_analyze()
    seed_seconds = time.monotonic() - started
    server = apiserver.Gunicorn(database_url, api_workers, tempfile.mkdtemp(prefix="bench-mem-"))
    token = apiserver.token_for(username)
    pages = max(1, api_runs // 50)
    rng = random.Random(7)
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    checkpoints: list[dict] = []
    lock = threading.Lock()

    def one(page: int) -> None:
        t0 = time.perf_counter()
        status, _ = apiserver.get(
            server.port, f"/api/v1/tasks/{task_id}/runs?page={page}", token=token
        )
        with lock:
            latencies.append((time.perf_counter() - t0) * 1000)
            statuses[status] = statuses.get(status, 0) + 1

    try:
        server.start()
        api_workers = server.workers
        with ThreadPoolExecutor(max_workers=api_workers) as pool:
            # Every worker serves the endpoint once before "before": imports are not growth.
            list(pool.map(one, [1] * (api_workers * 5)))
            checkpoints.append({"requests": 0, "rss_mb": server.rss()})
            done = 0
            for _ in range(4):
                batch = [rng.randint(1, pages) for _ in range(requests // 4)]
                list(pool.map(one, batch))
                done += len(batch)
                checkpoints.append({"requests": done, "rss_mb": server.rss()})
    finally:
        server.stop()
        shutil.rmtree(server.log_dir, ignore_errors=True)
    before, after = checkpoints[0]["rss_mb"], checkpoints[-1]["rss_mb"]
    measured = sorted(latencies[api_workers * 5 :])
    return {
        "workload": "api memory",
        "history_runs": api_runs,
        "requests": requests,
        "api_workers": server.workers,
        "seed_seconds": round(seed_seconds, 1),
        "statuses": statuses,
        "rss_before_mb": list(before.values()),
        "rss_after_mb": [after.get(pid) for pid in before],
        "growth_mb": [round((after.get(pid) or 0) - (mb or 0), 1) for pid, mb in before.items()],
        "checkpoints": [
            {"requests": c["requests"], "rss_mb": list(c["rss_mb"].values())} for c in checkpoints
        ],
        "p50_ms": round(proc.percentile(measured, 50), 1),
        "p99_ms": round(proc.percentile(measured, 99), 1),
        "max_ms": round(measured[-1], 1) if measured else 0.0,
    }


def measure(
    *,
    database_url: str,
    runs: int,
    minutes: float,
    workers: int,
    processes: int | None,
    emit: Callable[[dict], None],
    write: Callable[[str], None],
    api_runs: int = 100_000,
    api_requests: int = 1000,
    api_workers: int | None = None,
) -> list[dict]:
    soak = run_soak(
        database_url=database_url, runs=runs, minutes=minutes, workers=workers, processes=processes
    )
    emit(soak)
    write(
        f"soak: {soak['succeeded']:,}/{runs:,} runs succeeded in {soak['seconds']} s, "
        f"{soak['processes']} worker processes x --concurrency {soak['concurrency']}, "
        f"ran twice {soak['ran_twice']}"
    )
    write(
        f"  {'process':<11} {'start':>7} {'end':>7} {'max':>7} {'MB/min':>8} "
        f"{'MB/min after 1 min':>19}"
    )
    for name, s in soak["rss"].items():
        write(
            f"  {name:<11} {s['start_mb']:>7} {s['end_mb']:>7} {s['max_mb']:>7} "
            f"{s['slope_mb_per_min']:>8} {s['slope_after_1_min_mb_per_min']:>19}"
        )
    workload.reset_queue()
    api = run_api_memory(
        database_url=database_url, api_runs=api_runs, requests=api_requests, api_workers=api_workers
    )
    emit(api)
    write(
        f"api memory: {api_requests} GET /api/v1/tasks/{{id}}/runs?page=N over {api_runs:,} "
        f"runs, {api['api_workers']} gunicorn workers: RSS before {api['rss_before_mb']} MB, "
        f"after {api['rss_after_mb']} MB (growth {api['growth_mb']} MB); "
        f"statuses {api['statuses']}; latency p50 {api['p50_ms']} / p99 {api['p99_ms']} / "
        f"max {api['max_ms']} ms"
    )
    for c in api["checkpoints"]:
        write(f"  after {c['requests']:>5} requests: {c['rss_mb']} MB")
    return [soak, api]
