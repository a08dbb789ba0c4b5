"""Faults of a Patroni cluster under load, with every role a real process on multi-host URLs.

The rig of bench/patroni_cluster.py (three PostgreSQL 15 nodes, synchronous mode, ttl 10);
the API (gunicorn, its reads through DATABASE_REPLICA_URL with prefer-standby), schedulers,
workers, a reviewer and the notifier on `target_session_attrs=read-write`; one-time tasks created
through the API every 100 ms, a task read every 200 ms and a 1-second recurring task. Each fault
must leave: nothing acknowledged lost, no payload executed twice (every attempt counted), no
recurring occurrence missing, no role exited, every answer 2xx or 503 with Retry-After; before
each fault the task reads are answered by a standby (its own scan statistics count them). The
write-unavailability window of each fault is printed (`pytest -m chaos -s
tests/system/test_patroni_faults.py`; docs/benchmarks.md has the figures).
"""

from __future__ import annotations

import itertools
import shutil
import signal
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

from bench.patroni_cluster import PatroniCluster, can_run, low_free_port, signal_pid
from tests.conftest import ROOT, Processes, process_env, wait_for
from tests.system.api_process import sign_in_with_every_second_task, start_gunicorn

pytestmark = [
    pytest.mark.chaos,
    pytest.mark.processes,
    pytest.mark.skipif(not can_run(), reason="needs Debian's patroni, etcd and PostgreSQL 15"),
]

SCHEDULERS, WORKERS, REVIEWERS = 2, 2, 1  # two shared cores
CREATE_EVERY, READ_EVERY = 0.1, 0.2
PASSWORD = "patroni-test-password"
DATABASE = "scheduler"


@dataclass(frozen=True)
class Answer:
    at: float  # time.monotonic() when sent
    status: int  # 0: no HTTP answer at all (refused, timed out)
    retry_after: str | None
    task_id: str | None


class Traffic(threading.Thread):
    """Sends one request every `every` seconds and records each answer."""

    def __init__(self, base: str, token: str, every: float, read: str | None = None) -> None:
        super().__init__(daemon=True)
        self.base, self.headers = base, {"Authorization": f"Bearer {token}"}
        self.every, self.read = every, read
        self.answers: list[Answer] = []
        self.stopping = threading.Event()

    def request(self, session: requests.Session, n: int) -> requests.Response:
        if self.read:
            return session.get(f"{self.base}/api/v1/tasks/{self.read}", headers=self.headers)
        body = {
            "name": f"once-{n}",
            "kind": "handler",
            "payload": {"name": "record"},
            "schedule": {"type": "once", "delay": 0},
        }
        return session.post(f"{self.base}/api/v1/tasks", json=body, headers=self.headers)

    def run(self) -> None:
        session, n = requests.Session(), 0
        session.request = _with_timeout(session.request)  # type: ignore[method-assign]
        while not self.stopping.is_set():
            started = time.monotonic()
            n += 1
            try:
                r = self.request(session, n)
                task = r.json().get("id") if r.status_code == 201 else None
                self.answers.append(
                    Answer(started, r.status_code, r.headers.get("Retry-After"), task)
                )
            except requests.RequestException:
                self.answers.append(Answer(started, 0, None, None))
            self.stopping.wait(max(0.0, self.every - (time.monotonic() - started)))


def _with_timeout(request):  # type: ignore[no-untyped-def]
    def timed(*args, **kwargs):  # type: ignore[no-untyped-def]
        kwargs.setdefault("timeout", 30)
        return request(*args, **kwargs)

    return timed


@dataclass
class Stack:
    cluster: PatroniCluster
    procs: Processes
    records: Path
    base: str
    token: str
    recurring: str
    url: str
    creates: list[Answer]
    reads: list[Answer]
    env: dict[str, str]

    def sql(self, query: str) -> list[tuple]:
        with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as conn:
            return conn.execute(query).fetchall()


FIGURES: dict[str, str] = {}


@pytest.fixture(scope="module")
def stack(tmp_path_factory, django_db_blocker):
    tmp = tmp_path_factory.mktemp("patroni")
    cluster, procs = PatroniCluster(), Processes(tmp)
    records = tmp / "records"
    records.mkdir()
    try:
        cluster.start()
        cluster.healthy().sql(f"CREATE DATABASE {DATABASE}")
        url = cluster.url(DATABASE)
        env = process_env(
            DATABASE_URL=url,
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
        port = low_free_port()
        api_env = {**env, "DATABASE_REPLICA_URL": cluster.replica_url(DATABASE)}
        _, base = start_gunicorn(procs, api_env, tmp / "gunicorn.log", port)
        for _ in range(SCHEDULERS):
            procs.start("runscheduler", env=env)
        for _ in range(WORKERS):
            procs.start("runworker", "--concurrency", "4", env=env)
        for _ in range(REVIEWERS):
            procs.start("runreviewer", env=env)
        procs.start("runnotifier", env=env)
        token, recurring = sign_in_with_every_second_task(base, "ops", PASSWORD)
        yield Stack(cluster, procs, records, base, token, recurring, url, [], [], env)
    finally:
        try:
            procs.stop_all()
            for log in cluster.root.glob("**/*.log"):  # kept with the test's own logs
                shutil.copy(log, tmp / f"cluster-{log.parent.name}-{log.name}")
        finally:
            cluster.stop()
        if FIGURES:
            print("\n" + "\n".join(f"{k}: {v}" for k, v in FIGURES.items()))


def write_gap(answers: list[Answer], since: float) -> float:
    """The longest time between two acknowledged creates sent from `since` on (the one before
    included): how long writes were unavailable, to the create interval's precision."""
    ok = [a.at for a in answers if a.status == 201]
    before = [t for t in ok if t < since]
    times = before[-1:] + [t for t in ok if t >= since]
    return max((b - a for a, b in itertools.pairwise(times)), default=float("inf"))


def check_everything(stack: Stack) -> tuple[int, int]:
    """The invariants over everything the module's load did so far; returns (acknowledged,
    one-time runs)."""

    def unfinished() -> int:
        return stack.sql(
            "SELECT count(*) FROM tasks_run r JOIN tasks_task t ON t.id = r.task_id"
            " WHERE t.schedule_type = 'once' AND r.status <> 'succeeded'"
        )[0][0]

    wait_for(lambda: unfinished() == 0, timeout=60, details=stack.procs.logs)
    acknowledged = {a.task_id for a in stack.creates if a.status == 201}
    stored = {str(i) for (i,) in stack.sql("SELECT id FROM tasks_task WHERE schedule_type='once'")}
    lost = [(a.at, a.task_id) for a in stack.creates if a.status == 201 and a.task_id not in stored]
    assert not lost, f"{len(lost)} acknowledged creates lost (sent at, id): {lost}"
    once_runs = stack.sql(
        "SELECT r.id, count(a.id) FILTER (WHERE a.outcome = 'succeeded'), count(*) OVER"
        " (PARTITION BY r.task_id) FROM tasks_task t JOIN tasks_run r ON r.task_id = t.id"
        " LEFT JOIN tasks_attempt a ON a.run_id = r.id WHERE t.schedule_type = 'once'"
        " GROUP BY r.id, r.task_id"
    )
    assert len(once_runs) == len(stored), "one run per one-time task"
    assert all(ok == 1 and per_task == 1 for _, ok, per_task in once_runs)
    keys = Counter(
        line.split()[0] for f in stack.records.iterdir() for line in f.read_text().splitlines()
    )
    twice = sorted(k for k, n in keys.items() if n > 1)
    assert not twice, f"payloads executed twice: {twice}"
    times = [
        t
        for (t,) in stack.sql(
            f"SELECT scheduled_at FROM tasks_run WHERE task_id = '{stack.recurring}'"
            " AND status = 'succeeded' ORDER BY scheduled_at"
        )
    ]
    gaps = {b - a for a, b in itertools.pairwise(times)}
    assert gaps == {timedelta(seconds=1)}, f"an occurrence missing: {sorted(gaps)}"
    assert all(p.poll() is None for p in stack.procs.started), stack.procs.logs()
    for answers, ok in ((stack.creates, {201}), (stack.reads, {200})):
        statuses = Counter(a.status for a in answers)
        assert set(statuses) <= ok | {503}, statuses
        assert all(a.retry_after for a in answers if a.status == 503)
    return len(acknowledged), len(once_runs)


def task_scans(members: list) -> int:  # type: ignore[type-arg]
    """Scans of tasks_task counted on `members` (each server's own statistics)."""
    query = (
        "SELECT coalesce(sum(coalesce(idx_scan, 0) + coalesce(seq_scan, 0)), 0)"
        " FROM pg_stat_user_tables WHERE relname = 'tasks_task'"
    )
    return sum(int(m.sql(query, database=DATABASE)[0][0]) for m in members)


def under_load(stack: Stack, name: str, fault, *, failover: bool = True) -> None:  # type: ignore[no-untyped-def]
    """Runs `fault(leader, sync_standby)` under load; checks; records the figures."""
    cluster = stack.cluster
    leader = cluster.wait_healthy(timeout=90)
    sync = cluster.sync_standby(leader)
    creates = Traffic(stack.base, stack.token, CREATE_EVERY)
    reads = Traffic(stack.base, stack.token, READ_EVERY, read=stack.recurring)
    creates.start()
    reads.start()
    standbys = [m for m in cluster.members if m is not leader]
    scans = task_scans(standbys)
    try:
        wait_for(lambda: sum(a.status == 201 for a in creates.answers) >= 20, timeout=60)
        # Before the fault the task reads went to a standby: only the API's replica connection
        # reads tasks_task there (the roles' read-write connections skip standbys).
        wait_for(lambda: task_scans(standbys) > scans, timeout=10)
        started = time.monotonic()
        print(f"\n{name}: fault at {started:.2f}, leader {leader.name}, sync {sync.name}")
        fault(leader, sync)
        new = cluster.wait_healthy(timeout=90)
        # A failed-over leader comes back as a standby; it never takes the lock back.
        assert not failover or new.name != leader.name, f"{leader.name} is the leader again"
        # Writes are back: a create acknowledged after the cluster is whole again.
        back = time.monotonic()
        wait_for(lambda: any(a.status == 201 and a.at > back for a in creates.answers), timeout=30)
        time.sleep(2.0)
    finally:
        for traffic in (creates, reads):
            traffic.stopping.set()
            traffic.join()
        stack.creates.extend(creates.answers)
        stack.reads.extend(reads.answers)
    acknowledged, runs = check_everything(stack)
    statuses = Counter(a.status for a in creates.answers)
    read_statuses = Counter(a.status for a in reads.answers)
    FIGURES[name] = (
        f"leader {leader.name} -> {new.name}; writes unavailable "
        f"{write_gap(creates.answers, started):.1f} s; creates sent {len(creates.answers)}, "
        f"acknowledged {statuses[201]}, 503 {statuses[503]}; reads 200 {read_statuses[200]}, "
        f"503 {read_statuses[503]}; module so far: acknowledged {acknowledged}, lost 0, "
        f"one-time runs {runs}, executed twice 0"
    )


def test_planned_switchover(stack):
    under_load(stack, "switchover", lambda leader, sync: stack.cluster.switchover(leader, sync))


def test_leader_postmaster_killed(stack):
    def kill(leader, sync):  # type: ignore[no-untyped-def]
        pid = leader.postmaster_pid()
        assert pid
        signal_pid(pid, signal.SIGKILL)  # Patroni starts it again in place

    under_load(stack, "postmaster SIGKILL", kill, failover=False)


def test_leader_patroni_killed(stack):
    cluster = stack.cluster

    def kill(leader, sync):  # type: ignore[no-untyped-def]
        leader.process.kill()
        leader.process.wait()
        # Its PostgreSQL stays up and writable, its leader key expires after the ttl.
        wait_for(lambda: cluster.leader() not in (None, leader), timeout=60, details=cluster.logs)
        time.sleep(2.0)
        cluster.restart_member(leader)  # as its supervisor should; it rejoins as a standby

    under_load(stack, "Patroni SIGKILL", kill)


# Longer than REVIEWERS_RESCUE_AFTER_SECONDS (10 s): the orphan keeps every connection that
# stayed on it hanging in a commit that waits for a synchronous standby promoted meanwhile.
ORPHAN_SECONDS = 15.0


def test_leader_patroni_killed_orphan_kept(stack):
    """Patroni killed and restarted late (its supervisor slow): the orphan primary
    stays up and writable past the rescue threshold, and every commit on it waits for the
    standby promoted meanwhile. A reviewer reaches the new primary at once (here one started
    then, its URL listing the new leader first, as a reviewer restarted elsewhere would): the
    workers whose outcome writes hang on the orphan are alive and must keep their runs, so no
    payload runs twice (check_everything)."""
    cluster = stack.cluster

    def kill(leader, sync):  # type: ignore[no-untyped-def]
        leader.process.kill()
        leader.process.wait()
        new = wait_for(
            lambda: (m := cluster.leader()) not in (None, leader) and m,
            timeout=60,
            details=cluster.logs,
        )
        members = sorted(cluster.members, key=lambda m: m is not new)
        hosts = ",".join(f"127.0.0.1:{m.pg_port}" for m in members)
        url = f"postgres://postgres@{hosts}/{DATABASE}?target_session_attrs=read-write"
        stack.procs.start("runreviewer", env={**stack.env, "DATABASE_URL": url})
        time.sleep(ORPHAN_SECONDS)
        cluster.restart_member(leader)

    under_load(stack, "Patroni SIGKILL, orphan kept 15 s", kill)


def test_leader_host_paused_past_the_ttl(stack):
    cluster = stack.cluster

    def pause(leader, sync):  # type: ignore[no-untyped-def]
        cluster.pause(leader)
        try:
            wait_for(lambda: cluster.leader() not in (None, leader), timeout=60)
            time.sleep(2.0)
        finally:
            cluster.resume(leader)

    under_load(stack, "host paused (SIGSTOP)", pause)
