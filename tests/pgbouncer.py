"""A PgBouncer process in transaction pooling mode in front of a PostgreSQL server, for the tests
that run through one: the API group under SCHEDULER_TEST_PGBOUNCER=1 (tests/conftest.py) and
tests/system/test_pgbouncer_processes.py.

Debian 12's PgBouncer is 1.18: it cannot carry a prepared statement from one transaction to the
next, so whatever connects through it runs with DATABASE_PREPARED_STATEMENTS=false
(docs/operations.md, PgBouncer). Every database name passes (a `*` entry), so the test
database pytest-django creates is reachable under its own name.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
PSQL = shutil.which("psql")


def available() -> bool:
    return Path(PGBOUNCER).exists() and PSQL is not None


def admin(port: int, user: str, command: str) -> str | None:
    """A command on PgBouncer's admin console (simple query protocol only, hence psql); its
    output, or None while PgBouncer does not answer."""
    done = subprocess.run(
        [PSQL, "-h", "127.0.0.1", "-p", str(port), "-U", user, "-At", "-c", command, "pgbouncer"],
        capture_output=True,
        text=True,
    )
    return done.stdout if done.returncode == 0 else None


def transactions(port: int, user: str, database: str) -> int:
    """PgBouncer's count of the transactions it carried for `database`."""
    lines = (admin(port, user, "SHOW STATS") or "").splitlines()
    return sum(int(line.split("|")[1]) for line in lines if line.split("|")[0] == database)


@contextlib.contextmanager
def pgbouncer(
    *, server_host: str, server_port: str, user: str, port: int, pool_size: int = 4
) -> Iterator[int]:
    """PgBouncer on 127.0.0.1:`port` in transaction mode, trusting `user`, in front of every
    database of the server; yields `port` once its admin console answers, and stops it after.
    It keeps `pool_size` server connections open per database and hands them out in turn
    (FIFO), so a client's next transaction runs on another server connection: whatever a
    transaction leaves on its server connection (a prepared statement, a session SET) is missing
    from the next one, as under load. PgBouncer's default, LIFO, would give a lone client the
    same server connection every time and hide that."""
    folder = Path(tempfile.mkdtemp(prefix="scheduler-pgbouncer-"))
    folder.chmod(0o777)  # PgBouncer refuses root: it runs as postgres when we are root
    (folder / "users.txt").write_text(f'"{user}" ""\n')
    (folder / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"* = host={server_host} port={server_port or 5432}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {folder / 'users.txt'}\nadmin_users = {user}\n"
        f"pool_mode = transaction\ndefault_pool_size = {pool_size}\nmin_pool_size = {pool_size}\n"
        "server_round_robin = 1\nmax_client_conn = 200\n"
        f"logfile = {folder / 'pgbouncer.log'}\n"
    )
    for path in folder.iterdir():
        path.chmod(0o666)
    as_postgres = (
        ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups"]
        if os.geteuid() == 0
        else []
    )
    proc = subprocess.Popen(
        [*as_postgres, PGBOUNCER, str(folder / "pgbouncer.ini")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 15
        while admin(port, user, "SHOW VERSION") is None:
            if proc.poll() is not None or time.monotonic() > deadline:
                log = folder / "pgbouncer.log"
                raise RuntimeError(
                    "PgBouncer did not start:\n" + (log.read_text() if log.exists() else "")
                )
            time.sleep(0.1)
        yield port
    finally:
        proc.terminate()  # SIGTERM: PgBouncer closes every client and server connection now
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(folder, ignore_errors=True)
