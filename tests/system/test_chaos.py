"""Chaos: SIGKILL workers under load, restart PostgreSQL mid-run. Run with `pytest -m chaos`."""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from tasks.models import Attempt, Run
from tests.conftest import Processes, process_env, wait_for
from tests.factories import RunFactory, TaskFactory

pytestmark = [pytest.mark.chaos, pytest.mark.processes]

HEARTBEAT = 0.5
RESCUE_AFTER = 2.0
REVIEW_EVERY = 0.5
TIMING = {
    "TASKS_HEARTBEAT_SECONDS": str(HEARTBEAT),
    "REVIEWERS_RESCUE_AFTER_SECONDS": str(RESCUE_AFTER),
    "REVIEWERS_INTERVAL_SECONDS": str(REVIEW_EVERY),
    "TASKS_START_SLA_SECONDS": "600",
}


def recorded_lines(folder: Path) -> list[str]:
    return [line for f in folder.iterdir() for line in f.read_text().splitlines()]


def test_killing_workers_loses_nothing_and_records_each_run_once(processes, tmp_path):
    records = tmp_path / "records"
    records.mkdir()
    env = process_env(
        SCHEDULER_HANDLER_MODULES="tests.handlers",
        TEST_RECORD_DIR=str(records),
        TASKS_CLAIM_AHEAD="0",
        **TIMING,
    )
    task = TaskFactory(payload={"name": "record", "args": {"sleep": 0.01}}, max_attempts=20)
    now = timezone.now()
    total = 2000
    Run.objects.bulk_create(
        RunFactory.build(
            task=task,
            owner=task.owner,
            max_attempts=20,
            scheduled_at=now + timedelta(microseconds=i),
        )
        for i in range(total)
    )
    processes.start("runreviewer", env=env)
    # Concurrency 1 and no claim-ahead: a kill can repeat at most one executed-but-unrecorded
    # run's side effect (with claim-ahead, up to concurrency + TASKS_CLAIM_AHEAD per kill).
    workers = [processes.start("runworker", "--concurrency", "1", env=env) for _ in range(4)]
    kills: list[float] = []
    rng = random.Random(7)
    deadline = time.monotonic() + 240
    while Run.objects.filter(status="succeeded").count() < total:
        assert time.monotonic() < deadline, "runs did not all finish:\n" + processes.logs()
        time.sleep(rng.uniform(1.0, 2.0))
        if len(kills) < 12 and Run.objects.exclude(status="succeeded").count() > 200:
            victim = rng.randrange(len(workers))
            workers[victim].send_signal(signal.SIGKILL)
            workers[victim].wait()
            kills.append(time.time())
            workers[victim] = processes.start("runworker", "--concurrency", "1", env=env)

    assert len(kills) >= 3, "the driver killed workers while runs were in flight"
    assert Run.objects.count() == total
    assert set(Run.objects.values_list("status", flat=True)) == {"succeeded"}
    # Each run's outcome is recorded exactly once: one succeeded attempt per run.
    succeeded = Attempt.objects.filter(outcome="succeeded")
    assert succeeded.count() == total
    assert succeeded.values("run_id").distinct().count() == total
    lines = recorded_lines(records)
    keys = Counter(line.split()[0] for line in lines)
    assert len(keys) == total, "every run's payload ran"
    duplicates = len(lines) - len(keys)
    assert duplicates <= len(kills), f"{duplicates} duplicate side effects for {len(kills)} kills"
    # Every orphan is rescued within heartbeat timeout + reviewer interval + 1 s of its kill.
    bound = RESCUE_AFTER + REVIEW_EVERY + 1.0
    for rescue in Attempt.objects.filter(outcome="rescued"):
        killed_at = max(k for k in kills if k <= rescue.finished_at.timestamp() + 0.5)
        assert rescue.finished_at.timestamp() - killed_at <= bound + HEARTBEAT


def _pg_bin() -> Path | None:
    for version in ("17", "16", "15"):
        path = Path(f"/usr/lib/postgresql/{version}/bin")
        if (path / "pg_ctl").exists():
            return path
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PrivateCluster:
    """A throwaway PostgreSQL cluster owned by the `postgres` system user, on its own port."""

    def __init__(self, root: Path) -> None:
        self.bin = _pg_bin()
        self.data = root / "pgdata"
        self.port = _free_port()
        self.log = root / "pg.log"
        root.chmod(0o777)

    def _as_postgres(self, *args: str) -> None:
        command = ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else list(args)
        subprocess.run(command, check=True, capture_output=True, timeout=120)

    def start(self) -> None:
        assert self.bin is not None
        self._as_postgres(
            str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres"
        )
        self.pg_ctl("start")

    def pg_ctl(self, action: str) -> None:
        options = f"-p {self.port} -k /tmp -c listen_addresses=127.0.0.1"
        args = [str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w"]
        if action in ("start", "restart"):
            args += ["-o", options]
        if action in ("stop", "restart"):
            args += ["-m", "fast"]
        self._as_postgres(*args, action)

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/postgres"


@pytest.mark.skipif(_pg_bin() is None or shutil.which("runuser") is None, reason="needs pg_ctl")
def test_restarting_postgres_mid_run_loses_nothing(tmp_path):
    # Outside pytest's private (0700) temp folder, so the postgres system user can reach it.
    root = Path(tempfile.mkdtemp(prefix="scheduler-chaos-pg-"))
    cluster = PrivateCluster(root)
    cluster.start()
    procs = Processes(tmp_path)
    try:
        env = process_env(DATABASE_URL=cluster.url, **TIMING)
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "-v", "0"],
            env=env,
            check=True,
            timeout=120,
            cwd=Path(__file__).resolve().parents[2],
        )
        psql = ["psql", "-h", "127.0.0.1", "-p", str(cluster.port), "-U", "postgres", "-tAc"]

        def sql(query: str) -> str:
            return subprocess.run([*psql, query], check=True, capture_output=True, text=True).stdout

        sql(
            "INSERT INTO auth_user (username, password, is_superuser, first_name, last_name,"
            " email, is_staff, is_active, date_joined)"
            " VALUES ('chaos', '', false, '', '', '', false, true, now())"
        )
        sql(
            "INSERT INTO tasks_task (id, owner_id, name, kind, payload, schedule, schedule_type,"
            " priority, status, max_attempts, retry_backoff_base, retry_backoff_cap, notify,"
            " runs_planned, created_at, updated_at) SELECT gen_random_uuid(), id, 'chaos',"
            ' \'handler\', \'{"name": "sleep", "args": {"seconds": 0.05}}\', \'{"type": "once"}\','
            " 'once', 5, 'active', 20, 0.1, 1, '[]', 1, now(), now() FROM auth_user"
        )
        total = 400
        sql(
            "INSERT INTO tasks_run (id, task_id, owner_id, scheduled_at, execute_at, priority,"
            " status, attempt, max_attempts, worker, output, error, created_at) SELECT"
            " gen_random_uuid(), t.id, t.owner_id, now() + i * interval '10 ms',"
            f" now() + i * interval '10 ms', 5, 'scheduled', 0, 20, '', '', '', now()"
            f" FROM tasks_task t, generate_series(1, {total}) i"
        )
        workers = [procs.start("runworker", "--concurrency", "4", env=env) for _ in range(2)]
        others = [procs.start("runreviewer", env=env), procs.start("runscheduler", env=env)]

        def succeeded() -> int:
            return int(sql("SELECT count(*) FROM tasks_run WHERE status = 'succeeded'"))

        try:
            wait_for(lambda: succeeded() > 20, timeout=60)
        except AssertionError:
            raise AssertionError(procs.logs()) from None
        cluster.pg_ctl("restart")
        restarted = time.monotonic()
        before = succeeded()
        wait_for(lambda: succeeded() > before, timeout=5)
        carried_on = time.monotonic() - restarted
        wait_for(lambda: succeeded() == total, timeout=120, interval=0.5)
        assert all(p.poll() is None for p in workers + others), procs.logs()
        assert int(sql("SELECT count(*) FROM tasks_run")) == total
        per_run = sql(
            "SELECT count(*) FROM tasks_attempt WHERE outcome = 'succeeded' GROUP BY run_id"
            " HAVING count(*) > 1"
        )
        assert per_run.strip() == "", "a run recorded two successful attempts"
        assert carried_on < 5.0
    finally:
        procs.stop_all()
        cluster.pg_ctl("stop")
        shutil.rmtree(root, ignore_errors=True)
