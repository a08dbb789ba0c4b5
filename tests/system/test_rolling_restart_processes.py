"""A rolling restart of every role under load: nothing failed, lost or run twice.

The API (gunicorn) is reloaded gracefully (SIGHUP: new workers start, the old ones finish their
requests), then its master itself is replaced (SIGUSR2: a new master with new workers on the same
listening socket; once they are ready, SIGTERM to the old master, whose workers finish their
requests); each scheduler, worker and reviewer is replaced by starting the new process first
and then stopping the old one with SIGTERM (a worker finishes or hands back its runs). One-time
tasks are created through the API every 100 ms, each payload taking 0.3 s, and a 1-second
recurring task runs throughout (docs/operations.md, "Rolling restarts").
"""

from __future__ import annotations

import itertools
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest

from bench.patroni_cluster import low_free_port
from tests.conftest import ROOT, database_url, process_env, wait_for
from tests.system.api_process import (
    Adopted,
    pid_in,
    ready_workers,
    sign_in_with_every_second_task,
    start_gunicorn,
)
from tests.system.test_patroni_faults import CREATE_EVERY, Traffic

pytestmark = [pytest.mark.chaos, pytest.mark.processes]
PASSWORD = "rolling-test-password"


def test_every_role_replaced_one_by_one_under_load(processes, tmp_path):
    records = tmp_path / "records"
    records.mkdir()
    env = process_env(
        ALLOWED_HOSTS="127.0.0.1",
        SCHEDULER_HANDLER_MODULES="tests.handlers",
        TEST_RECORD_DIR=str(records),
        DJANGO_SUPERUSER_USERNAME="ops",
        DJANGO_SUPERUSER_PASSWORD=PASSWORD,
    )
    subprocess.run(
        [sys.executable, "manage.py", "ensureadmin"], env=env, cwd=ROOT, check=True, timeout=120
    )
    port = low_free_port()
    api_log, pidfile = tmp_path / "gunicorn.log", tmp_path / "gunicorn.pid"
    api, base = start_gunicorn(processes, env, api_log, port, pidfile=pidfile)
    # Every process loads Django before it is ready: 15 s seen on a loaded machine, hence 120 s.
    wait_for(lambda: len(ready_workers(api_log, api.pid)) == 2, timeout=120, details=processes.logs)
    roles = {
        "runscheduler": [processes.start("runscheduler", env=env) for _ in range(2)],
        "runworker": [
            processes.start("runworker", "--concurrency", "4", env=env) for _ in range(2)
        ],
        "runreviewer": [processes.start("runreviewer", env=env)],
    }
    token, recurring = sign_in_with_every_second_task(base, "ops", PASSWORD)

    class SlowCreates(Traffic):
        def request(self, session, n):  # type: ignore[no-untyped-def]
            body = {
                "name": f"rolling-{n}",
                "kind": "handler",
                "payload": {"name": "record", "args": {"sleep": 0.3}},
                "schedule": {"type": "once", "delay": 0},
            }
            return session.post(f"{self.base}/api/v1/tasks", json=body, headers=self.headers)

    def ready(proc: subprocess.Popen) -> bool:
        """The role's "started as" line (its readiness, as a deployment would probe it)."""
        log = tmp_path / f"{Path(proc.args[2]).name}-{processes.started.index(proc)}.log"
        return "started as" in log.read_text(errors="replace")

    for running in roles.values():
        for proc in running:
            wait_for(lambda p=proc: ready(p), timeout=120, details=processes.logs)
    load = SlowCreates(base, token, CREATE_EVERY)
    load.start()
    try:
        wait_for(lambda: sum(a.status == 201 for a in load.answers) >= 20, timeout=60)
        # gunicorn's graceful reload: new workers, the old ones finish their requests.
        old_workers = ready_workers(api_log, api.pid)
        api.send_signal(signal.SIGHUP)
        wait_for(
            lambda: len(ready_workers(api_log, api.pid) - old_workers) == 2,
            timeout=120,
            details=processes.logs,
        )
        # A new master (SIGUSR2) on the same socket; the old one goes once its workers are ready.
        api.send_signal(signal.SIGUSR2)
        new_pid = wait_for(
            lambda: pid_in(pidfile.with_name("gunicorn.pid.2")), timeout=60, details=processes.logs
        )
        master = Adopted(int(new_pid))
        processes.started.append(master)
        wait_for(
            lambda: len(ready_workers(api_log, master.pid)) == 2,
            timeout=120,
            details=processes.logs,
        )
        api.send_signal(signal.SIGTERM)  # graceful: its workers finish their requests
        assert api.wait(timeout=60) == 0, processes.logs()
        # The new master notices and takes the old one's place (and pidfile).
        wait_for(lambda: pid_in(pidfile) == master.pid, timeout=30, details=processes.logs)
        for command, running in roles.items():
            for i, old in enumerate(list(running)):
                extra = ("--concurrency", "4") if command == "runworker" else ()
                new = running[i] = processes.start(command, *extra, env=env)
                # The new one is up before the old one goes.
                wait_for(lambda p=new: ready(p), timeout=120, details=processes.logs)
                old.send_signal(signal.SIGTERM)
                assert old.wait(timeout=60) == 0, processes.logs()
        time.sleep(3)
    finally:
        load.stopping.set()
        load.join()

    url = database_url()

    def sql(query: str) -> list[tuple]:
        with psycopg.connect(url, autocommit=True) as conn:
            return conn.execute(query).fetchall()

    def unfinished() -> int:
        return sql(
            "SELECT count(*) FROM tasks_run r JOIN tasks_task t ON t.id = r.task_id"
            " WHERE t.schedule_type = 'once' AND r.status <> 'succeeded'"
        )[0][0]

    wait_for(lambda: unfinished() == 0, timeout=60, details=processes.logs)
    statuses = Counter(a.status for a in load.answers)
    assert set(statuses) == {201}, statuses  # no 503, no refused connection
    acknowledged = {a.task_id for a in load.answers}
    stored = {str(i) for (i,) in sql("SELECT id FROM tasks_task WHERE schedule_type = 'once'")}
    assert acknowledged <= stored
    once = sql(
        "SELECT count(a.id) FILTER (WHERE a.outcome = 'succeeded'), count(a.id) FROM tasks_task t"
        " JOIN tasks_run r ON r.task_id = t.id LEFT JOIN tasks_attempt a ON a.run_id = r.id"
        " WHERE t.schedule_type = 'once' GROUP BY r.id"
    )
    assert len(once) == len(stored) and all(ok == 1 for ok, _ in once)
    keys = Counter(
        line.split()[0] for f in records.iterdir() for line in f.read_text().splitlines()
    )
    assert not [k for k, n in keys.items() if n > 1], "a payload ran twice"
    times = [
        t
        for (t,) in sql(
            f"SELECT scheduled_at FROM tasks_run WHERE task_id = '{recurring}'"
            " AND status = 'succeeded' ORDER BY scheduled_at"
        )
    ]
    assert {b - a for a, b in itertools.pairwise(times)} == {timedelta(seconds=1)}
    assert master.poll() is None and all(p.poll() is None for r in roles.values() for p in r)
    handed_back = sum(n > 1 for _, n in once)
    print(
        f"\nrolling restart: API workers reloaded and master replaced; "
        f"creates {len(load.answers)}, all 201; one-time runs {len(once)}, "
        f"each succeeded once, {handed_back} with a handed-back attempt; payloads run twice 0; "
        f"recurring occurrences {len(times)}, none missing"
    )
