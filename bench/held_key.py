"""Transactions a second that one worker commits while a full concurrency key holds its runs.

`python -m bench.held_key` (DATABASE_URL and SECRET_KEY set; the database named
`<DATABASE_URL's name>_held` is made afresh and dropped afterwards): a key of limit 1 whose slot
a run of an absent worker holds, 4 due runs of the key, one `runworker --concurrency 2`; after
4 s, pg_stat_database.xact_commit over 10 s (nothing else uses the database). Prints one JSON
line. The bound we hold it to is 10 a second (a held worker must not spin on the claim).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[1]
SETTLE_SECONDS = 4.0
MEASURE_SECONDS = 10.0


def main() -> int:
    base = os.environ["DATABASE_URL"]
    url = f"{base}_held"
    name = url.rsplit("/", 1)[1]
    admin = base.rsplit("/", 1)[0] + "/postgres"
    env = {**os.environ, "DATABASE_URL": url, "LOG_LEVEL": "WARNING"}
    with psycopg.connect(admin, autocommit=True) as db:
        db.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        db.execute(f'CREATE DATABASE "{name}"')
    try:
        manage = [sys.executable, str(ROOT / "manage.py")]
        subprocess.run([*manage, "migrate", "-v0"], check=True, env=env, cwd=ROOT)
        subprocess.run([sys.executable, "-m", "bench.held_key", "--seed"], check=True, env=env)
        with psycopg.connect(url, autocommit=True) as db:
            worker = subprocess.Popen([*manage, "runworker", "--concurrency", "2"], env=env)
            try:
                time.sleep(SETTLE_SECONDS)
                before, started = _commits(db), time.monotonic()
                time.sleep(MEASURE_SECONDS)
                after, seconds = _commits(db), time.monotonic() - started
                waiting = _one(db, "SELECT count(*) FROM tasks_run WHERE status <> 'running'")
            finally:
                worker.terminate()
                worker.wait(30)
        # The two reads of the counter are this connection's own transactions.
        rate = (after - before - 2) / seconds
        print(json.dumps({"workload": "held_key", "tx_per_s": round(rate, 1), "waiting": waiting}))
    finally:
        with psycopg.connect(admin, autocommit=True) as db:
            db.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return 0


def _commits(db: psycopg.Connection) -> int:
    db.execute("SELECT pg_stat_clear_snapshot()")
    return _one(db, "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")


def _one(db: psycopg.Connection, query: str) -> int:
    row = db.execute(query).fetchone()
    assert row is not None
    return int(row[0])


def seed() -> None:
    """The key, its runs, and the slot held by a worker that is not there (Django set up)."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_project.settings")
    import django

    django.setup()
    from bench import workload
    from tasks.models import Run

    now = datetime.now(UTC)
    workload.enqueue([now] * 5, now=now, key_limit=1)
    first = Run.objects.order_by("id").first()
    assert first is not None
    Run.objects.filter(pk=first.pk).update(
        status="running", worker="absent", attempt=1, started_at=now, heartbeat_at=now
    )


if __name__ == "__main__":
    if sys.argv[1:] == ["--seed"]:
        seed()
        sys.exit(0)
    sys.exit(main())
