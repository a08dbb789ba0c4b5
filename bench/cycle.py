"""Where a worker's time goes: one Worker, in this process, draining N no-op runs.

Every call of the worker's one statement per cycle (`claim.record_and_claim`: record the
finished runs, claim the freed slots) is timed, with the runs it recorded and claimed; the CPU
time of this process (the worker's threads) and of its PostgreSQL backend is read from /proc
before and after. The figures say how long the statement takes, how large the batches are,
and whether the worker or the database is the busier side. With `--claim-ahead` the worker's
TASKS_CLAIM_AHEAD is overridden, to show what the batch size does.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from django.db import connection
from django.test import override_settings

from bench import proc, workload
from tasks.management.commands.runworker import generic_plans
from tasks.transitions import claim


def measure(
    *,
    n: int,
    concurrency: int,
    claim_ahead: int | None,
    emit: Callable[[dict], None],
    write: Callable[[str], None],
) -> dict:
    os.environ.setdefault("BENCH_RUN_DIR", tempfile.mkdtemp(prefix="bench-cycle-"))
    from bench import handlers  # noqa: F401  (registers the `bench` handler here)
    from tasks.worker.worker import Worker

    workload.reset_queue()
    now = datetime.now(UTC)
    workload.enqueue([now] * n, now=now)
    workload.analyze_queue()

    cycles: list[tuple[float, int, int]] = []
    backends: set[int] = set()
    original = claim.record_and_claim

    def timed(**kwargs: object) -> tuple[list, list]:
        started = time.perf_counter()
        result = original(**kwargs)
        cycles.append((time.perf_counter() - started, len(kwargs["outcomes"]), len(result[1])))
        backends.add(connection.connection.info.backend_pid)
        return result

    # The worker's connection as runworker makes it (generic plans): with `auto`, PostgreSQL
    # planned the cycle statement again at every execution here, which no worker does
    # (bench/NOTEBOOK.md, "The run-end triggers once per statement").
    generic_plans()
    overrides = {} if claim_ahead is None else {"TASKS_CLAIM_AHEAD": claim_ahead}
    with override_settings(**overrides):
        worker = Worker(concurrency=concurrency)
    stop = threading.Event()
    thread = threading.Thread(target=worker.serve, args=(stop,), name="bench-worker")
    claim.record_and_claim = timed
    cpu_before = proc.cpu_seconds(os.getpid())
    started = time.perf_counter()
    try:
        thread.start()
        while worker.finished_count < n and time.perf_counter() - started < 120:
            time.sleep(0.02)
        elapsed = time.perf_counter() - started
        cpu_worker = proc.cpu_seconds(os.getpid()) - cpu_before
        # The backend's whole life is this drain (a fresh connection of the worker's thread).
        cpu_backend = sum(proc.cpu_seconds(pid) for pid in backends)
    finally:
        stop.set()
        thread.join()
        claim.record_and_claim = original
    ms = sorted(seconds * 1000 for seconds, _, _ in cycles)
    result = {
        "workload": "cycle",
        "n": n,
        "concurrency": concurrency,
        "claim_ahead": worker.max_ahead,
        "finished": worker.finished_count,
        "seconds": round(elapsed, 2),
        "rate": round(worker.finished_count / elapsed, 1),
        "cycles": len(cycles),
        "statement_ms_p50": round(statistics.median(ms), 2) if ms else None,
        "statement_ms_p90": round(ms[int(len(ms) * 0.9)], 2) if ms else None,
        "statement_seconds_total": round(sum(ms) / 1000, 2),
        "recorded_per_cycle": round(statistics.mean(c[1] for c in cycles), 1) if cycles else 0,
        "claimed_per_cycle": round(statistics.mean(c[2] for c in cycles), 1) if cycles else 0,
        "worker_cpu_seconds": round(cpu_worker, 2),
        "backend_cpu_seconds": round(cpu_backend, 2),
        "machine": proc.machine(),
    }
    emit(result)
    write(
        f"cycle: {result['finished']:,} runs in {result['seconds']} s ({result['rate']}/s), "
        f"{result['cycles']} statements, p50 {result['statement_ms_p50']} ms / p90 "
        f"{result['statement_ms_p90']} ms, {result['recorded_per_cycle']} recorded + "
        f"{result['claimed_per_cycle']} claimed per statement; CPU: worker "
        f"{result['worker_cpu_seconds']} s, its PostgreSQL backend "
        f"{result['backend_cpu_seconds']} s"
    )
    workload.reset_queue()
    return result
