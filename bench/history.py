"""History does not slow the queue: the claim rate with millions of finished runs.

The throughput workload (workload.throughput, W = 4, N no-op runs) is measured three times in
one run: with an empty history, with `rows` finished runs generated with SQL (data.py), and
empty again after the history is truncated. Two of the workload's hooks are scoped to the
benchmark's own rows for all three phases alike, so the history is neither truncated between
rounds nor counted as the round's completions (the same code path with or without history):
`reset_queue` deletes only the bench owner's tasks, runs and attempts, and `_db_counts` counts
only them. The claim statement itself (transitions.claim.claim_sql) is shown with EXPLAIN
(ANALYZE, BUFFERS), in a transaction rolled back, with N runs waiting.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from unittest import mock

from django.db import connection, transaction

from bench import data, proc, workload
from tasks.transitions.claim import UNLIMITED, _candidates, claim_sql

HISTORY_TASKS = 5000


def _bench_owner() -> int:
    return workload.bench_owner().pk


def reset_keeping_history() -> None:
    """workload.reset_queue for the bench owner's rows only; then VACUUM ANALYZE, CHECKPOINT."""
    owner = _bench_owner()
    with connection.cursor() as cursor:
        cursor.execute(
            "DELETE FROM tasks_attempt WHERE run_id IN"
            " (SELECT id FROM tasks_run WHERE owner_id = %s)",
            [owner],
        )
        cursor.execute("DELETE FROM tasks_run WHERE owner_id = %s", [owner])
        cursor.execute("DELETE FROM tasks_task WHERE owner_id = %s", [owner])
        cursor.execute("TRUNCATE tasks_process")
        for table in ("tasks_run", "tasks_task", "tasks_attempt"):
            cursor.execute(f"VACUUM ANALYZE {table}")
        cursor.execute("CHECKPOINT")


def bench_counts() -> tuple[int, int, datetime | None, datetime | None]:
    """workload._db_counts over the bench owner's runs only (an index scan, not 10M rows)."""
    owner = _bench_owner()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FILTER (WHERE status = 'succeeded'),"
            " (SELECT count(*) FROM tasks_attempt a JOIN tasks_run r ON r.id = a.run_id"
            "   WHERE r.owner_id = %(o)s AND a.outcome = 'succeeded'),"
            " min(started_at), max(finished_at) FROM tasks_run WHERE owner_id = %(o)s",
            {"o": owner},
        )
        return cursor.fetchone()


def explain_claim(n: int) -> dict:
    """EXPLAIN (ANALYZE, BUFFERS) of the claim with `n` runs due, rolled back.

    The plan shown is the generic one, which is what a worker runs: its statements are prepared
    once per connection (tasks/db.py) and PostgreSQL keeps the generic plan when it costs no
    more than planning each execution with the actual parameters would."""
    now = datetime.now(UTC)
    workload.enqueue([now] * n, now=now)
    workload.analyze_queue()
    sql = claim_sql(_candidates(10, 100))
    names = (
        "worker",
        "limit",
        "prefetch",
        "owner_cap",
        "window",
        "channel",
        "cpu_total",
        "memory_total",
        "cpu_free",
        "memory_free",
        "since",
    )
    for number, name in enumerate(names, start=1):
        sql = sql.replace(f"%({name})s", f"${number}")
    # A worker with no capacity declared, and a sandbox for executables (claim_sql's default).
    unlimited = f"{UNLIMITED}, {UNLIMITED}, {UNLIMITED}, {UNLIMITED}"
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cursor.execute(
            "PREPARE bench_claim(text, int, float8, int, float8, text, bigint, bigint,"
            f" bigint, bigint, timestamptz) AS {sql}"
        )
        cursor.execute(
            "EXPLAIN (ANALYZE, BUFFERS) EXECUTE bench_claim('explain', 10, 0.5, 100,"
            f" 3600, 'x', {unlimited}, NULL)"
        )
        plan = [row[0] for row in cursor.fetchall()]
        cursor.execute("DEALLOCATE bench_claim")
        transaction.set_rollback(True)
    reset_keeping_history()
    # Index scans name the index ("Index Scan using X on tasks_run"); a bitmap scan names it on
    # its own line ("Bitmap Index Scan on X"), under the "Bitmap Heap Scan on tasks_run".
    scans = [
        line.strip(" ->").split("  (")[0]
        for line in plan
        if (" on tasks_run" in line and "Scan" in line and "Bitmap Heap" not in line)
        or "Bitmap Index Scan on" in line
    ]
    execution = next((line for line in plan if line.startswith("Execution Time")), "")
    return {
        "plan": plan,
        "tasks_run_scans": scans,
        # run_claimable_idx is partial (claimable runs only): it keeps the history out.
        "on_partial_claim_index": any("run_claimable_idx" in line for line in scans),
        "seq_scan_on_tasks_run": any("Seq Scan on tasks_run" in line for line in plan),
        "execution_ms": float(execution.split(":")[1].split()[0]) if execution else None,
    }


def _rounds(url: str, *, workers: int, n: int, repeat: int, emit: Callable, label: str) -> list:
    rates = []
    with (
        mock.patch.object(workload, "reset_queue", reset_keeping_history),
        mock.patch.object(workload, "_db_counts", bench_counts),
    ):
        for _ in range(repeat):
            result = workload.throughput(database_url=url, workers=workers, n=n)
            emit({**result, "label": label})
            rates.append(result["rate"])
        reset_keeping_history()
    return rates


def measure(
    *,
    database_url: str,
    rows: int,
    n: int,
    workers: int,
    repeat: int,
    emit: Callable[[dict], None],
    write: Callable[[str], None],
) -> dict:
    """Empty, history, empty again: medians of `repeat` rounds each, and the claim's plan."""
    empty = _rounds(database_url, workers=workers, n=n, repeat=repeat, emit=emit, label="empty")
    plan_empty = explain_claim(n)
    write(f"empty history: {empty} runs/s; claim {plan_empty['execution_ms']} ms")

    owner = data.owner_id("history")
    data.insert_tasks(
        owner,
        HISTORY_TASKS,
        raw_schedule={"type": "interval", "every": 60},
        next_unplanned_at=None,
        prefix="history ",
    )

    def progress(done: int, seconds: float) -> None:
        if done % 1_000_000 < 250_000 or done == rows:
            write(f"  history: {done:,} runs in {seconds:.0f} s ({done / seconds:,.0f}/s)")

    generate_seconds = data.insert_history(owner, rows, progress=progress)
    started = time.monotonic()
    data.vacuum_analyze()
    vacuum_seconds = time.monotonic() - started
    sizes = data.table_sizes()
    write(
        f"history: {rows:,} runs in {generate_seconds:.0f} s, VACUUM ANALYZE "
        f"{vacuum_seconds:.0f} s; sizes {sizes}"
    )
    with_history = _rounds(
        database_url, workers=workers, n=n, repeat=repeat, emit=emit, label=f"history {rows}"
    )
    plan_history = explain_claim(n)

    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE tasks_attempt, tasks_run, tasks_task CASCADE")
    again = _rounds(database_url, workers=workers, n=n, repeat=repeat, emit=emit, label="empty")
    baseline = statistics.median(empty + again)
    result = {
        "workload": "history",
        "rows": rows,
        "history_tasks": HISTORY_TASKS,
        "workers": workers,
        "n": n,
        "generate_seconds": round(generate_seconds, 1),
        "vacuum_analyze_seconds": round(vacuum_seconds, 1),
        "table_sizes": sizes,
        "rates_empty_before": empty,
        "rates_with_history": with_history,
        "rates_empty_after": again,
        "median_empty": baseline,
        "median_with_history": statistics.median(with_history),
        "ratio": round(statistics.median(with_history) / baseline, 3) if baseline else None,
        "claim_empty": {k: v for k, v in plan_empty.items() if k != "plan"},
        "claim_with_history": {k: v for k, v in plan_history.items() if k != "plan"},
        "machine": proc.machine(),
    }
    emit(result)
    write("EXPLAIN (ANALYZE, BUFFERS) of the claim with the history present:")
    for line in plan_history["plan"]:
        write("  " + line)
    write(
        f"claim rate W={workers}: empty {result['median_empty']} runs/s (before {empty}, after "
        f"{again}), with {rows:,} finished runs {result['median_with_history']} runs/s "
        f"{with_history}: ratio {result['ratio']} (target >= 0.9); claim scans "
        f"{plan_history['tasks_run_scans']}, {plan_history['execution_ms']} ms "
        f"(empty: {plan_empty['execution_ms']} ms)"
    )
    return result
