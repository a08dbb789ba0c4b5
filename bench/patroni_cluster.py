"""A Patroni cluster for the tests and `bench day`: single-node etcd and three PostgreSQL nodes,
on 127.0.0.1.

Debian's `etcd`, `patroni` and PostgreSQL server binaries, each started as its own process with
its data in one temporary folder; `stop()` ends every one of them (paused ones included) and
removes the folder, whatever state a test left them in. Synchronous mode with ttl 10, loop_wait 2
and retry_timeout 4, as an operator would run it. In bench/ so that the benchmark and the tests
share it: tests import bench, bench never imports tests.

Harness facts learned the hard way:
- ports come from below 32768: inside the kernel's ephemeral range a node once found its port
  taken by an outgoing connection and Patroni exited;
- health is judged by `pg_stat_replication` on the leader (both standbys streaming, one of them
  `sync`), not by `patronictl list`, which shows a member "running" before it streams;
- Patroni talks to etcd's v2 protocol (`etcd:`, not `etcd3:`; see `_write_config`);
- Patroni runs under `setpriv` (which execs, unlike `runuser`), so the PID held is Patroni's own;
  a postmaster's PID is the first line of its `postmaster.pid`.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import requests

PG_BIN = Path("/usr/lib/postgresql/15/bin")
ETCD, PATRONI, PATRONICTL = Path("/usr/bin/etcd"), Path("/usr/bin/patroni"), "/usr/bin/patronictl"
SCOPE = "scheduler"
TTL, LOOP_WAIT, RETRY_TIMEOUT = 10, 2, 4
ROOT_PREFIX = "scheduler-patroni-"  # what a leftover process's command line would contain
_taken: set[int] = set()


def can_run() -> bool:
    have = all(p.exists() for p in (PG_BIN / "postgres", ETCD, PATRONI))
    return have and (os.geteuid() != 0 or shutil.which("setpriv") is not None)


def low_free_port() -> int:
    """A port free on 127.0.0.1, below the ephemeral range (20000-32767), not handed out before
    in this session."""
    while True:
        port = random.randint(20000, 32767)
        if port in _taken:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _taken.add(port)
        return port


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (dead, not yet reaped by its parent) counts as gone.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False


def signal_pid(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(line) for line in out.split()]


def dcs_settings() -> dict:
    """The cluster-wide settings (bootstrap.dcs) the rig runs with: deploy/ha/patroni/patroni.yml
    ships the same (tests/deploy/test_compose.py holds them equal)."""
    return {
        "ttl": TTL,
        "loop_wait": LOOP_WAIT,
        "retry_timeout": RETRY_TIMEOUT,
        "maximum_lag_on_failover": 1048576,
        "synchronous_mode": True,
        "postgresql": {
            "use_pg_rewind": True,
            "use_slots": True,
            "parameters": {
                "wal_level": "replica",
                "hot_standby": "on",
                # The API reads from standbys: their snapshots hold back the primary's cleanup
                # instead of being cancelled by its replay (docs/operations.md, Read replicas).
                "hot_standby_feedback": "on",
                "wal_log_hints": "on",
                "max_wal_senders": 10,
                "max_replication_slots": 10,
                "max_connections": 100,
                "synchronous_commit": "on",
            },
        },
    }


@dataclass
class Member:
    name: str
    root: Path
    pg_port: int = field(default_factory=low_free_port)
    api_port: int = field(default_factory=low_free_port)
    process: subprocess.Popen | None = None

    @property
    def data(self) -> Path:
        return self.root / self.name

    @property
    def config(self) -> Path:
        return self.root / f"{self.name}.yml"

    @property
    def log(self) -> Path:
        return self.root / f"{self.name}.log"

    @property
    def patroni_pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def postmaster_pid(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None

    @property
    def dsn(self) -> str:
        return f"host=127.0.0.1 port={self.pg_port} user=postgres dbname=postgres"

    def sql(self, query: str, *, timeout: int = 5, database: str = "postgres") -> list[tuple]:
        dsn = self.dsn.replace("dbname=postgres", f"dbname={database}")
        with psycopg.connect(dsn, autocommit=True, connect_timeout=timeout) as conn:
            cursor = conn.execute(query)
            return cursor.fetchall() if cursor.description else []

    def role(self) -> str | None:
        """Patroni's REST API: "master"/"primary", "replica", or None when it does not answer."""
        try:
            return requests.get(f"http://127.0.0.1:{self.api_port}/patroni", timeout=1).json()[
                "role"
            ]
        except (requests.RequestException, ValueError, KeyError):
            return None


class PatroniCluster:
    def __init__(
        self,
        members: int = 3,
        *,
        primary_start_timeout: int | None = None,
        parameters: dict[str, str] | None = None,
    ) -> None:
        # Outside pytest's private (0700) folders: the postgres user must reach it. In memory
        # where there is a tmpfs: three clusters' files are created and removed per run.
        shm = Path("/dev/shm")
        parent = str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None
        self.root = Path(tempfile.mkdtemp(prefix=ROOT_PREFIX, dir=parent))
        self.root.chmod(0o777)
        self.etcd_port, self.etcd_peer_port = low_free_port(), low_free_port()
        self.etcd: subprocess.Popen | None = None
        self.members = [Member(f"pg{i}", self.root) for i in range(1, members + 1)]
        self.primary_start_timeout = primary_start_timeout
        self.parameters = dict(parameters or {})  # each node's own, beside dcs_settings()'s
        self.stopped: set[str] = set()  # members a test paused (SIGSTOP)

    # --- URLs our roles use ---------------------------------------------------------------
    def hosts(self) -> str:
        return ",".join(f"127.0.0.1:{m.pg_port}" for m in self.members)

    def url(self, database: str = "postgres") -> str:
        """Every member; libpq connects to whichever accepts writes."""
        return f"postgres://postgres@{self.hosts()}/{database}?target_session_attrs=read-write"

    def replica_url(self, database: str = "postgres") -> str:
        """Every member; a standby when one answers, the primary otherwise."""
        return f"postgres://postgres@{self.hosts()}/{database}?target_session_attrs=prefer-standby"

    # --- Starting ---------------------------------------------------------------------------
    def start(self, *, timeout: float = 60) -> None:
        """etcd, then every member at once (one wins the initialize key, the others copy it);
        returns when the cluster is healthy."""
        self._start_etcd()
        for member in self.members:
            self._write_config(member)
            self.start_member(member)
        self.wait_healthy(timeout=timeout)

    def _start_etcd(self) -> None:
        client, peer = (
            f"http://127.0.0.1:{self.etcd_port}",
            f"http://127.0.0.1:{self.etcd_peer_port}",
        )
        self.etcd = subprocess.Popen(
            [
                str(ETCD),
                "--name=etcd0",
                f"--data-dir={self.root / 'etcd'}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=etcd0={peer}",
                "--enable-v2=true",
                "--logger=zap",
                "--log-outputs=stderr",
            ],
            stdout=(self.root / "etcd.log").open("wb"),
            stderr=subprocess.STDOUT,
        )
        self._wait(lambda: self._etcd_healthy(), 20, "etcd did not start")

    def _etcd_healthy(self) -> bool:
        try:
            return requests.get(f"http://127.0.0.1:{self.etcd_port}/health", timeout=1).ok
        except requests.RequestException:
            return False

    def _write_config(self, member: Member) -> None:
        dcs = dcs_settings()
        if self.primary_start_timeout is not None:
            dcs["primary_start_timeout"] = self.primary_start_timeout
        config = {
            "scope": SCOPE,
            "namespace": "/service/",
            "name": member.name,
            "restapi": {
                "listen": f"127.0.0.1:{member.api_port}",
                "connect_address": f"127.0.0.1:{member.api_port}",
            },
            # etcd's v2 protocol: there Patroni renews the leader key only while it holds
            # it (compare-and-swap). With `etcd3`, Patroni 3.0.2 puts the key unconditionally
            # when its lease is gone: a leader paused past the ttl took the lock back from the
            # member promoted meanwhile, whose commits the rewind then discarded.
            "etcd": {"hosts": [f"127.0.0.1:{self.etcd_port}"]},
            "bootstrap": {"dcs": dcs, "initdb": [{"encoding": "UTF8"}, {"auth": "trust"}]},
            "postgresql": {
                "listen": f"127.0.0.1:{member.pg_port}",
                "connect_address": f"127.0.0.1:{member.pg_port}",
                "data_dir": str(member.data),
                "bin_dir": str(PG_BIN),
                "pgpass": str(self.root / f"{member.name}.pgpass"),
                "authentication": {
                    "superuser": {"username": "postgres", "password": "postgres"},
                    "replication": {"username": "postgres", "password": "postgres"},
                    "rewind": {"username": "postgres", "password": "postgres"},
                },
                "parameters": {"unix_socket_directories": str(self.root), **self.parameters},
                "pg_hba": [
                    "local all all trust",
                    "host all all 127.0.0.1/32 trust",
                    "host replication all 127.0.0.1/32 trust",
                ],
            },
        }
        member.config.write_text(json.dumps(config, indent=2))  # JSON is YAML

    def start_member(self, member: Member) -> None:
        """Start (or start again) a member's Patroni, which starts its PostgreSQL."""
        as_postgres = (
            ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups"]
            if os.geteuid() == 0
            else []
        )
        member.process = subprocess.Popen(
            [*as_postgres, str(PATRONI), str(member.config)],
            stdout=member.log.open("ab"),
            stderr=subprocess.STDOUT,
            cwd=self.root,
        )

    def restart_member(self, member: Member) -> None:
        """Start a killed member's Patroni again as its supervisor should: its PostgreSQL
        (orphaned, maybe still a writable primary) is stopped first (`pg_ctl stop -m
        immediate`). Patroni 3.0.2 started next to a running orphan primary reloads its
        configuration without `synchronous_standby_names` before it demotes: the commits
        waiting for the standby are released as successful, and the rewind then discards them
        (docs/operations.md)."""
        pid = member.postmaster_pid()
        if pid and alive(pid):
            signal_pid(pid, signal.SIGQUIT)
            self._wait(lambda: not alive(pid), 20, f"{member.name}'s orphan did not stop")
        self.start_member(member)

    # --- State ------------------------------------------------------------------------------
    def leader(self) -> Member | None:
        """The member whose Patroni holds the leader key (its REST API's /leader answers 200)."""
        for member in self.members:
            if member.name in self.stopped:
                continue
            try:
                if requests.get(f"http://127.0.0.1:{member.api_port}/leader", timeout=1).ok:
                    return member
            except requests.RequestException:
                continue
        return None

    def replication(self, leader: Member) -> list[tuple[str, str, str]]:
        """(application_name, state, sync_state) of each standby streaming from `leader`."""
        return leader.sql(
            "SELECT application_name, state, sync_state FROM pg_stat_replication"
            " ORDER BY application_name",
            timeout=2,
        )

    def healthy(self, expected: int | None = None) -> Member | None:
        """The leader when it accepts writes and every other member streams from it, one
        synchronously; None otherwise."""
        leader = self.leader()
        if leader is None:
            return None
        try:
            if leader.sql("SELECT pg_is_in_recovery()", timeout=2) != [(False,)]:
                return None
            rows = self.replication(leader)
        except psycopg.Error:
            return None
        want = (expected if expected is not None else len(self.members)) - 1
        streaming = [r for r in rows if r[1] == "streaming"]
        return leader if len(streaming) == want and any(r[2] == "sync" for r in rows) else None

    def sync_standby(self, leader: Member) -> Member:
        names = [name for name, _, sync in self.replication(leader) if sync == "sync"]
        assert len(names) == 1, names
        return next(m for m in self.members if m.name == names[0])

    def wait_healthy(self, *, timeout: float = 60, expected: int | None = None) -> Member:
        return self._wait(lambda: self.healthy(expected), timeout, "the cluster is not healthy")

    def _wait(self, predicate, timeout: float, what: str):  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} within {timeout}s\n{self.logs()}")
            time.sleep(0.2)

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-2500:]}"
            for p in sorted(self.root.glob("*.log"))
        )

    # --- Faults -----------------------------------------------------------------------------
    def patronictl(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [PATRONICTL, "-c", str(self.members[0].config), *args],
            capture_output=True,
            text=True,
            timeout=60,
        )

    def switchover(self, leader: Member, candidate: Member) -> None:
        """A planned switchover (in synchronous mode Patroni 3.0.2 hands over to the current
        synchronous standby only)."""
        done = self.patronictl(
            "switchover",
            SCOPE,
            "--leader",
            leader.name,
            "--candidate",
            candidate.name,
            "--force",
        )
        assert done.returncode == 0, done.stdout + done.stderr

    def member_pids(self, member: Member) -> list[int]:
        """Patroni, the postmaster and its children: everything "the host" runs."""
        pids = [pid for pid in (member.patroni_pid, member.postmaster_pid()) if pid]
        postmaster = member.postmaster_pid()
        return pids + (children(postmaster) if postmaster else [])

    def pause(self, member: Member) -> None:
        """The member's host stops (SIGSTOP to Patroni, the postmaster and its backends)."""
        self.stopped.add(member.name)
        for pid in self.member_pids(member):
            signal_pid(pid, signal.SIGSTOP)

    def resume(self, member: Member) -> None:
        for pid in self.member_pids(member):
            signal_pid(pid, signal.SIGCONT)
        self.stopped.discard(member.name)

    # --- Stopping ---------------------------------------------------------------------------
    def pids(self) -> list[int]:
        """Every process of the cluster still alive."""
        pids = [m.patroni_pid for m in self.members] + [m.postmaster_pid() for m in self.members]
        pids.append(self.etcd.pid if self.etcd else None)
        found = subprocess.run(
            ["pgrep", "-f", str(self.root)], capture_output=True, text=True
        ).stdout.split()
        listed = {p for p in pids if p} | {int(p) for p in found}
        return sorted(p for p in listed - {os.getpid()} if alive(p))

    def stop(self) -> None:
        """Every process ends, whatever a test did to it (paused, orphaned, half started);
        then the folder goes."""
        try:
            for member in self.members:
                for pid in self.member_pids(member):
                    signal_pid(pid, signal.SIGCONT)  # a paused process cannot act on SIGTERM
            # No graceful stop is needed: Patroni goes first, so it cannot start its
            # PostgreSQL again, then each postmaster shuts down immediately (SIGQUIT).
            for member in self.members:
                if member.process is not None:
                    member.process.kill()
                    member.process.wait()
            for member in self.members:
                pid = member.postmaster_pid()
                if pid and alive(pid):
                    signal_pid(pid, signal.SIGQUIT)
            deadline = time.monotonic() + 10
            while any(alive(p) for p in self.pids() if p != (self.etcd and self.etcd.pid)):
                if time.monotonic() > deadline:
                    for pid in self.pids():
                        signal_pid(pid, signal.SIGKILL)
                    break
                time.sleep(0.1)
            if self.etcd is not None and self.etcd.poll() is None:
                self.etcd.terminate()
                try:
                    self.etcd.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.etcd.kill()
                    self.etcd.wait()
            for pid in self.pids():  # anything left at all
                signal_pid(pid, signal.SIGKILL)
            # Orphans are reaped by init: wait until none is listed any more.
            deadline = time.monotonic() + 10
            while self.pids() and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
