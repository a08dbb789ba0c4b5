"""The raw limit of the SKIP LOCKED design in plain SQL (psycopg 3).

Nothing of ours runs here: it measures what PostgreSQL on this machine allows, so every figure of
the scheduler can be read as a ratio to it, measured in the same run.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from dataclasses import dataclass

import psycopg

SCHEMA = """
DROP TABLE IF EXISTS jobs, job_history;
CREATE TABLE jobs (
    id bigserial PRIMARY KEY, status text NOT NULL DEFAULT 'queued', priority smallint NOT NULL,
    execute_at timestamptz NOT NULL, attempts int NOT NULL DEFAULT 0, locked_by text,
    locked_at timestamptz, finished_at timestamptz, payload jsonb NOT NULL DEFAULT '{}');
CREATE INDEX jobs_queued_idx ON jobs (priority DESC, execute_at) WHERE status = 'queued';
CREATE TABLE job_history (
    id bigserial PRIMARY KEY, job_id bigint NOT NULL, status text NOT NULL, worker text NOT NULL,
    attempt int NOT NULL, started_at timestamptz NOT NULL, finished_at timestamptz NOT NULL);
"""

CLAIM = """
UPDATE jobs SET status = 'running', attempts = attempts + 1, locked_by = %(w)s, locked_at = now()
 WHERE id IN (SELECT id FROM jobs WHERE status = 'queued' AND execute_at <= now()
               ORDER BY priority DESC, execute_at LIMIT %(b)s FOR UPDATE SKIP LOCKED)
RETURNING id, attempts, locked_at
"""


@dataclass(frozen=True)
class RawResult:
    workers: int
    batch: int
    jobs: int
    succeeded: int
    seconds: float
    rate: float
    claimed_twice: int
    history_mismatch: int
    left_running: int


def _worker(url: str, name: str, batch: int, start: mp.Event, stop_at: mp.Value) -> None:
    with psycopg.connect(url, autocommit=False) as conn:
        start.wait()
        while time.monotonic() < stop_at.value:
            with conn.transaction():
                rows = conn.execute(CLAIM, {"w": name, "b": batch}).fetchall()
            if not rows:
                return
            for job_id, attempt, started in rows:
                with conn.transaction():
                    conn.execute(
                        "UPDATE jobs SET status = 'succeeded', finished_at = now() WHERE id = %s",
                        [job_id],
                    )
                    conn.execute(
                        "INSERT INTO job_history (job_id, status, worker, attempt, started_at,"
                        " finished_at) VALUES (%s, 'succeeded', %s, %s, %s, now())",
                        [job_id, name, attempt, started],
                    )


def run_raw(
    url: str, *, workers: int, batch: int, jobs: int, cap_seconds: float = 20.0
) -> RawResult:
    """Enqueue `jobs` due jobs, release `workers` processes together, measure jobs/s."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(SCHEMA)
        conn.execute(
            "INSERT INTO jobs (priority, execute_at) SELECT (random() * 9)::int,"
            " now() - random() * interval '1 minute' FROM generate_series(1, %s)",
            [jobs],
        )
        conn.execute("VACUUM ANALYZE jobs")
        conn.execute("CHECKPOINT")
    ctx = mp.get_context("fork")
    start = ctx.Event()
    stop_at = ctx.Value("d", 0.0)
    procs = [
        ctx.Process(target=_worker, args=(url, f"w{i}", batch, start, stop_at))
        for i in range(workers)
    ]
    for proc in procs:
        proc.start()
    time.sleep(0.5)  # let every process connect before the release
    released = time.monotonic()
    stop_at.value = released + cap_seconds
    start.set()
    for proc in procs:
        proc.join()
    elapsed = time.monotonic() - released
    with psycopg.connect(url, autocommit=True) as conn:
        succeeded = conn.execute("SELECT count(*) FROM jobs WHERE status = 'succeeded'").fetchone()[
            0
        ]
        twice = conn.execute("SELECT count(*) FROM jobs WHERE attempts > 1").fetchone()[0]
        mismatch = conn.execute(
            "SELECT count(*) FROM jobs j WHERE status = 'succeeded' AND"
            " (SELECT count(*) FROM job_history h WHERE h.job_id = j.id) <> 1"
        ).fetchone()[0]
        running = conn.execute("SELECT count(*) FROM jobs WHERE status = 'running'").fetchone()[0]
        conn.execute("DROP TABLE jobs, job_history")
    return RawResult(
        workers=workers,
        batch=batch,
        jobs=jobs,
        succeeded=succeeded,
        seconds=round(elapsed, 3),
        rate=round(succeeded / elapsed, 1),
        claimed_twice=twice,
        history_mismatch=mismatch,
        left_running=running,
    )
