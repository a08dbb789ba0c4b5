"""The faults of `bench day` and the raw-SQL floor that watches them.

- `SqlFloor`: every 100 ms a `SELECT 1` and a one-row INSERT, each its own round trip on one
  psycopg connection to the three-host read-write URL (reconnecting after an error): the
  latency and the write unavailability plain SQL sees, beside the API's, in the same run.
- `PatroniFaults`: one planned switchover at a third of the run, one leader host crash (SIGKILL
  of its Patroni, postmaster and backends; restarted as its supervisor would once a new leader
  is up) at two thirds; each recorded as a window from the fault to the cluster healthy again.
- `RoleKiller`: every 30 s a role process SIGKILLed (a scheduler, worker or reviewer, restarted
  a second later as its supervisor would; or an API process, which gunicorn's master replaces).
"""

from __future__ import annotations

import random
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import psycopg

from bench.patroni_cluster import PatroniCluster, signal_pid

PROBE_EVERY = 0.1
RESTART_DELAY = 1.0


@dataclass
class Fault:
    name: str
    start: float  # time.time()
    end: float | None = None  # the cluster healthy again (Patroni faults), or the restart
    detail: str = ""


class SqlFloor(threading.Thread):
    def __init__(self, url: str) -> None:
        super().__init__(name="sql-floor", daemon=True)
        self.url = url
        self.stopping = threading.Event()
        self.selects: list[tuple[float, float]] = []  # (sent at, ms) of answered SELECT 1
        self.failed_selects: list[float] = []
        self.writes: list[float] = []  # sent-at times of committed INSERTs

    def run(self) -> None:
        conn: psycopg.Connection | None = None
        while not self.stopping.is_set():
            started = time.time()
            try:
                if conn is None:
                    conn = psycopg.connect(self.url, autocommit=True, connect_timeout=2)
                t = time.perf_counter()
                conn.execute("SELECT 1").fetchone()
                self.selects.append((started, (time.perf_counter() - t) * 1000))
                conn.execute("INSERT INTO bench_day_floor DEFAULT VALUES")
                self.writes.append(started)
            except psycopg.Error:
                self.failed_selects.append(started)
                if conn is not None:
                    conn.close()
                conn = None
            self.stopping.wait(max(0.0, PROBE_EVERY - (time.time() - started)))
        if conn is not None:
            conn.close()


class PatroniFaults(threading.Thread):
    def __init__(self, cluster: PatroniCluster, at: list[tuple[float, str]]) -> None:
        super().__init__(name="patroni-faults", daemon=True)
        self.cluster, self.at = cluster, at  # (time.time() due, "switchover" | "leader kill")
        self.faults: list[Fault] = []
        self.errors: list[str] = []

    def run(self) -> None:
        for due, kind in self.at:
            time.sleep(max(0.0, due - time.time()))
            try:
                if kind == "switchover":
                    self._switchover()
                else:
                    self._kill()
            except Exception as error:  # reported, the day goes on
                self.errors.append(f"{kind}: {str(error)[:300]}")
                if self.faults and self.faults[-1].end is None:
                    self.faults[-1].end = time.time()  # given up waiting: the window ends here
                    self.faults[-1].detail += " (the cluster was not whole again in time)"

    def _switchover(self) -> None:
        cluster = self.cluster
        leader = cluster.wait_healthy(timeout=120)
        sync = cluster.sync_standby(leader)
        fault = Fault("Patroni switchover", time.time(), detail=f"{leader.name} -> {sync.name}")
        self.faults.append(fault)
        cluster.switchover(leader, sync)
        cluster.wait_healthy(timeout=300)
        fault.end = time.time()

    def _kill(self) -> None:
        cluster = self.cluster
        leader = cluster.wait_healthy(timeout=300)
        pids = cluster.member_pids(leader)
        fault = Fault("leader host killed", time.time(), detail=leader.name)
        self.faults.append(fault)
        for pid in pids:
            signal_pid(pid, signal.SIGKILL)
        if leader.process is not None:
            leader.process.wait()
        deadline = time.monotonic() + 120
        while (new := cluster.leader()) in (None, leader):
            if time.monotonic() > deadline:
                raise RuntimeError("no new leader within 120 s")
            time.sleep(0.2)
        promoted = time.time()
        time.sleep(2.0)
        fault.detail += f" -> {new.name}, new leader after {promoted - fault.start:.1f} s"
        cluster.restart_member(leader)  # it rejoins as a standby (pg_rewind if it must)
        cluster.wait_healthy(timeout=300)
        fault.end = time.time()
        fault.detail += f", three members streaming after {fault.end - fault.start:.1f} s"


@dataclass
class Victim:
    name: str
    kill: Callable[[], int | None]  # SIGKILL; returns the pid killed (None: nothing to kill)
    restart: Callable[[], None] | None  # None: something else restarts it


@dataclass
class RoleKiller:
    victims: list[Victim]
    every: float = 30.0
    seed: int = 30
    kills: list[Fault] = field(default_factory=list)

    def due(self, start: float, now: float) -> bool:
        return now >= start + self.every * (len(self.kills) + 1)

    def kill_one(self) -> None:
        victim = random.Random(self.seed + len(self.kills)).choice(self.victims)
        fault = Fault(f"SIGKILL {victim.name}", time.time())
        pid = victim.kill()
        fault.detail = f"pid {pid}"
        self.kills.append(fault)
        if victim.restart is not None:
            time.sleep(RESTART_DELAY)
            victim.restart()
        fault.end = time.time()
