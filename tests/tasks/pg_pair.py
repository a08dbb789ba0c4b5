"""A throwaway PostgreSQL primary with a synchronous streaming standby, on free ports.

Clusters belong to the `postgres` system user (initdb and pg_ctl refuse root) and live outside
pytest's private (0700) temporary folders, so that user can reach them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

from tests.conftest import free_port


def pg_bin() -> Path | None:
    for version in ("17", "16", "15"):
        path = Path(f"/usr/lib/postgresql/{version}/bin")
        if (path / "pg_ctl").exists():
            return path
    return None


def can_run() -> bool:
    return pg_bin() is not None and (os.geteuid() != 0 or shutil.which("runuser") is not None)


def as_postgres(*args: str) -> None:
    command = ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else list(args)
    subprocess.run(command, check=True, capture_output=True, timeout=120)


class Node:
    def __init__(self, root: Path, name: str) -> None:
        self.bin = pg_bin()
        assert self.bin is not None
        self.data = root / name
        self.log = root / f"{name}.log"
        self.port = free_port()

    def pg_ctl(self, action: str, *extra: str) -> None:
        args = [str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w"]
        if action == "start":
            args += ["-o", f"-p {self.port} -k /tmp -c listen_addresses=127.0.0.1"]
        as_postgres(*args, *extra, action)

    def sql(self, query: str) -> list[tuple]:
        dsn = f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"
        with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
            cursor = conn.execute(query)
            return cursor.fetchall() if cursor.description else []


class PrimaryStandby:
    """`start()`: initdb the primary, pg_basebackup -R the standby, then make it synchronous:
    a commit is acknowledged only once the standby has flushed it (synchronous_commit = on)."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="scheduler-failover-"))
        self.root.chmod(0o777)
        self.primary = Node(self.root, "primary")
        self.standby = Node(self.root, "standby")

    @property
    def url(self) -> str:
        """Both hosts; libpq connects to whichever accepts writes."""
        hosts = f"127.0.0.1:{self.primary.port},127.0.0.1:{self.standby.port}"
        return f"postgres://postgres@{hosts}/postgres?target_session_attrs=read-write"

    def start(self) -> None:
        p, s = self.primary, self.standby
        as_postgres(str(p.bin / "initdb"), "-D", str(p.data), "-A", "trust", "-U", "postgres")
        p.pg_ctl("start")
        as_postgres(
            str(p.bin / "pg_basebackup"),
            "-h",
            "127.0.0.1",
            "-p",
            str(p.port),
            "-U",
            "postgres",
            "-D",
            str(s.data),
            "-R",
            "-X",
            "stream",
            "-c",
            "fast",
        )
        s.pg_ctl("start")
        # Only the primary waits for a standby: the promoted standby has none to wait for (the
        # `synchronous_mode` choice of Patroni; docs/reliability.md says what is at risk).
        p.sql("ALTER SYSTEM SET synchronous_standby_names = '*'")
        p.sql("SELECT pg_reload_conf()")
        deadline = time.monotonic() + 30
        while p.sql("SELECT sync_state FROM pg_stat_replication") != [("sync",)]:
            assert time.monotonic() < deadline, "the standby did not become synchronous"
            time.sleep(0.2)

    def fail_over(self) -> tuple[float, float]:
        """The primary dies (no shutdown checkpoint, no goodbye to clients); the standby is
        promoted 2 s later, as a failover manager would after noticing. Returns when the primary
        was gone and when the standby accepted writes (time.monotonic())."""
        self.primary.pg_ctl("stop", "-m", "immediate")
        down = time.monotonic()
        time.sleep(2.0)
        self.standby.pg_ctl("promote")
        return down, time.monotonic()

    def stop(self) -> None:
        for node in (self.primary, self.standby):
            try:
                node.pg_ctl("stop", "-m", "immediate")
            except subprocess.CalledProcessError:
                pass  # already stopped
        shutil.rmtree(self.root, ignore_errors=True)
