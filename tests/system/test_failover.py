"""A PostgreSQL failover under load, with every role as a real process.

A primary with a synchronous standby (tests/tasks/pg_pair.py); every role on the two-host URL
(`target_session_attrs=read-write`); one-time tasks created through the API every 100 ms and a
1-second recurring task; the primary stopped with `-m immediate` and the standby promoted 2 s
later. Run with `pytest -m chaos -s tests/system/test_failover.py` to see the figures.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
import requests

from tests.conftest import ROOT, Processes, free_port, process_env, wait_for, wait_for_api
from tests.system.api_process import sign_in_with_every_second_task
from tests.tasks.pg_pair import PrimaryStandby, can_run

pytestmark = [
    pytest.mark.chaos,
    pytest.mark.processes,
    pytest.mark.skipif(not can_run(), reason="needs PostgreSQL's server binaries (pg_ctl)"),
]

# Fewer replicas than docker-compose.ha.yml runs: two shared cores.
SCHEDULERS, WORKERS, REVIEWERS = 3, 2, 1
CREATE_EVERY = 0.1
PASSWORD = "failover-test-password"


@dataclass(frozen=True)
class Answer:
    at: float  # time.monotonic()
    status: int  # 0: no HTTP answer at all (refused, timed out)
    retry_after: str | None
    task_id: str | None


class Load(threading.Thread):
    """POSTs a one-time task every CREATE_EVERY seconds and records every answer."""

    def __init__(self, base: str, token: str) -> None:
        super().__init__(daemon=True)
        self.base, self.headers = base, {"Authorization": f"Bearer {token}"}
        self.answers: list[Answer] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        session, n = requests.Session(), 0
        while not self.stopping.is_set():
            started = time.monotonic()
            n += 1
            body = {
                "name": f"once-{n}",
                "kind": "handler",
                "payload": {"name": "record"},
                "schedule": {"type": "once", "delay": 0},
            }
            try:
                r = session.post(
                    f"{self.base}/api/v1/tasks", json=body, headers=self.headers, timeout=10
                )
                task = r.json().get("id") if r.status_code == 201 else None
                self.answers.append(
                    Answer(started, r.status_code, r.headers.get("Retry-After"), task)
                )
            except requests.RequestException:
                self.answers.append(Answer(started, 0, None, None))
            self.stopping.wait(max(0.0, CREATE_EVERY - (time.monotonic() - started)))


class HealthProbe(threading.Thread):
    """GET /health every 0.25 s: (time sent, status, the component statuses)."""

    def __init__(self, base: str) -> None:
        super().__init__(daemon=True)
        self.base = base
        self.seen: list[tuple[float, int, dict[str, str]]] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(0.25):
            sent = time.monotonic()
            try:
                r = requests.get(f"{self.base}/health", timeout=10)
                parts = {k: v["status"] for k, v in r.json()["components"].items()}
                self.seen.append((sent, r.status_code, parts))
            except (requests.RequestException, ValueError, KeyError):
                self.seen.append((sent, 0, {}))


def start_api(procs: Processes, env: dict[str, str], log: Path) -> str:
    port = free_port()
    procs.started.append(
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "scheduler_project.wsgi",
                "--workers",
                "2",
                "--bind",
                f"127.0.0.1:{port}",
                "--timeout",
                "30",
            ],
            cwd=ROOT,
            env=env,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
        )
    )
    return wait_for_api(f"http://127.0.0.1:{port}")


def recorded_keys(folder: Path) -> Counter[str]:
    return Counter(line.split()[0] for f in folder.iterdir() for line in f.read_text().splitlines())


def test_failover_under_load_loses_nothing_and_records_nothing_twice(tmp_path):
    pair, procs = PrimaryStandby(), Processes(tmp_path)
    records = tmp_path / "records"
    records.mkdir()
    load = health = None
    try:
        pair.start()
        env = process_env(
            DATABASE_URL=pair.url,
            ALLOWED_HOSTS="127.0.0.1",
            SCHEDULER_HANDLER_MODULES="tests.handlers",
            TEST_RECORD_DIR=str(records),
            DJANGO_SUPERUSER_USERNAME="ops",
            DJANGO_SUPERUSER_PASSWORD=PASSWORD,
        )
        for command in ("migrate", "ensureadmin"):
            subprocess.run(
                [sys.executable, "manage.py", command],
                env=env,
                cwd=ROOT,
                check=True,
                capture_output=True,
                timeout=180,
            )
        base = start_api(procs, env, tmp_path / "gunicorn.log")
        roles = [procs.start("runscheduler", env=env) for _ in range(SCHEDULERS)]
        roles += [procs.start("runworker", "--concurrency", "4", env=env) for _ in range(WORKERS)]
        roles += [procs.start("runreviewer", env=env) for _ in range(REVIEWERS)]
        roles.append(procs.start("runnotifier", env=env))
        token, recurring = sign_in_with_every_second_task(base, "ops", PASSWORD)
        load, health = Load(base, token), HealthProbe(base)
        load.start()
        health.start()
        # About 5 s of load on the primary first.
        wait_for(lambda: sum(a.status == 201 for a in load.answers) >= 50, timeout=60)

        down, promoted = pair.fail_over()
        new = pair.standby  # the new primary
        promoted_at = new.sql("SELECT clock_timestamp()")[0][0]

        def first_create_after_promotion() -> float | None:
            ok = [a.at for a in load.answers if a.status == 201 and a.at >= promoted]
            return ok[0] - promoted if ok else None

        wait_for(lambda: first_create_after_promotion() is not None, timeout=15)
        time.sleep(8.0)
        load.stopping.set()
        load.join()
        wait_for(lambda: any(s == 200 and t > promoted for t, s, _ in health.seen), timeout=45)
        health.stopping.set()
        health.join()

        # Every role process (scheduler, worker's watch thread, reviewer, notifier) writes its
        # heartbeat to the new primary: each one reconnected.
        def reconnected() -> int:
            query = (
                "SELECT count(DISTINCT name) FROM tasks_process WHERE stopped_at IS NULL"
                " AND last_seen_at > %s"
            )
            with psycopg.connect(pair.url, autocommit=True) as conn:
                return conn.execute(query, [promoted_at]).fetchone()[0]

        wait_for(lambda: reconnected() == len(roles), timeout=20, details=procs.logs)

        def unfinished() -> int:
            query = (
                "SELECT count(*) FROM tasks_run r JOIN tasks_task t ON t.id = r.task_id"
                " WHERE t.schedule_type = 'once' AND r.status <> 'succeeded'"
            )
            return new.sql(query)[0][0]

        wait_for(lambda: unfinished() == 0, timeout=60, details=procs.logs)

        # 1. Nothing acknowledged is lost; every one-time task ran and is recorded once.
        acknowledged = {a.task_id for a in load.answers if a.status == 201}
        stored = {
            str(i) for (i,) in new.sql("SELECT id FROM tasks_task WHERE schedule_type = 'once'")
        }
        assert acknowledged <= stored, f"{len(acknowledged - stored)} acknowledged creates lost"
        once_runs = new.sql(
            "SELECT r.id, count(a.id) FILTER (WHERE a.outcome = 'succeeded'), count(*) OVER"
            " (PARTITION BY r.task_id) FROM tasks_task t JOIN tasks_run r ON r.task_id = t.id"
            " LEFT JOIN tasks_attempt a ON a.run_id = r.id WHERE t.schedule_type = 'once'"
            " GROUP BY r.id, r.task_id"
        )
        assert len(once_runs) == len(stored), "one run per one-time task"
        assert all(ok == 1 and per_task == 1 for _, ok, per_task in once_runs)
        keys = recorded_keys(records)
        twice = sorted(k for k, n in keys.items() if n > 1)
        assert not twice, f"payloads executed twice: {twice}"

        # The recurring task: one run per second, none missing, each run once.
        times = [
            t
            for (t,) in new.sql(
                f"SELECT scheduled_at FROM tasks_run WHERE task_id = '{recurring}'"
                " AND status = 'succeeded' ORDER BY scheduled_at"
            )
        ]
        gaps = [b - a for a, b in itertools.pairwise(times)]
        assert gaps and set(gaps) == {timedelta(seconds=1)}, "an occurrence missing"
        assert (
            new.sql(
                f"SELECT count(*) FROM tasks_run WHERE task_id = '{recurring}' AND status"
                f" IN ('skipped', 'failed')"
            )[0][0]
            == 0
        )
        # No role process exited (the API's master included).
        assert all(p.poll() is None for p in procs.started), procs.logs()

        # 2. The API answered 503 with Retry-After in the window, never 500, and creates again
        # within 10 s of the promotion.
        statuses = Counter(a.status for a in load.answers)
        refused = [a for a in load.answers if a.status == 503]
        assert set(statuses) <= {201, 503}, statuses
        assert refused and all(a.retry_after for a in refused)
        back_after = first_create_after_promotion()
        assert back_after is not None and back_after < 10.0

        # 3. /health: down during the failover naming the database, 200 again afterwards.
        during = [(s, parts) for t, s, parts in health.seen if down <= t <= promoted - 0.5]
        assert during and all(s == 503 and parts["database"] == "down" for s, parts in during)
        healthy_again = min(t for t, s, _ in health.seen if s == 200 and t > promoted) - promoted
        rescued = new.sql("SELECT count(*) FROM tasks_attempt WHERE outcome = 'rescued'")[0][0]

        window = [a.at for a in refused]
        print(
            f"\nfailover: creates sent {len(load.answers)}, acknowledged {statuses[201]}, "
            f"refused 503 {statuses[503]} (all with Retry-After) over "
            f"{max(window) - min(window):.1f} s, 500s {statuses[500]}; first create "
            f"{back_after:.2f} s after promotion; /health 200 again {healthy_again:.1f} s after "
            f"promotion; one-time runs {len(once_runs)}, recurring occurrences {len(times)}, "
            f"payloads run twice {len(twice)}, runs rescued {rescued}; role processes beating"
            f" on the new primary {len(roles)} of {len(roles)}"
        )
    finally:
        for thread in (load, health):
            if thread is not None:
                thread.stopping.set()
        procs.stop_all()
        pair.stop()
