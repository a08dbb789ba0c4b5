"""The API behind Debian's PgBouncer (1.18) in transaction pooling mode.

PgBouncer before 1.21 cannot carry a prepared statement from one transaction to the next, so the
API runs with `DATABASE_PREPARED_STATEMENTS=false`, `DATABASE_CONN_MAX_AGE=0` (PgBouncer pools)
and no session settings (docs/operations.md, PgBouncer). Several clients at once create tasks and
read them back: every answer is the right one, and PgBouncer carried the transactions.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest
import requests
from django.contrib.auth import get_user_model
from django.db import connection

from bench.patroni_cluster import low_free_port
from tests.conftest import wait_for
from tests.gunicorn_server import gunicorn  # noqa: F401  (the fixture, used by name)

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
PSQL = shutil.which("psql")
pytestmark = [
    pytest.mark.processes,
    pytest.mark.skipif(not Path(PGBOUNCER).exists() or not PSQL, reason="needs pgbouncer, psql"),
]
CLIENTS, ROUNDS = 6, 15


@pytest.fixture
def pgbouncer():
    """A PgBouncer in transaction mode in front of the test database's server."""
    s = connection.settings_dict
    if not s["HOST"] or s["HOST"].startswith("/") or "," in s["HOST"]:
        pytest.skip("needs the test database on one TCP host")
    folder = Path(tempfile.mkdtemp(prefix="scheduler-pgbouncer-"))
    folder.chmod(0o777)  # PgBouncer refuses root: it runs as postgres when we are root
    port = low_free_port()
    (folder / "users.txt").write_text(f'"{s["USER"]}" ""\n')
    (folder / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"* = host={s['HOST']} port={s['PORT'] or 5432}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {folder / 'users.txt'}\nadmin_users = {s['USER']}\n"
        "pool_mode = transaction\ndefault_pool_size = 4\nmax_client_conn = 200\n"
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
        wait_for(lambda: admin(port, "SHOW VERSION") is not None, timeout=15)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(folder, ignore_errors=True)


def admin(port: int, command: str) -> str | None:
    """PgBouncer's admin console (simple query protocol only, hence psql)."""
    user = connection.settings_dict["USER"]
    done = subprocess.run(
        [PSQL, "-h", "127.0.0.1", "-p", str(port), "-U", user, "-At", "-c", command, "pgbouncer"],
        capture_output=True,
        text=True,
    )
    return done.stdout if done.returncode == 0 else None


def transactions(port: int, database: str) -> int:
    """PgBouncer's count of transactions it carried for `database`."""
    lines = (admin(port, "SHOW STATS") or "").splitlines()
    return sum(int(line.split("|")[1]) for line in lines if line.split("|")[0] == database)


def test_the_api_works_through_pgbouncer_in_transaction_mode(pgbouncer, gunicorn):  # noqa: F811
    s = connection.settings_dict
    get_user_model().objects.create_user("bouncer", password="bouncer-password-1")
    base = gunicorn(
        DATABASE_URL=f"postgres://{s['USER']}@127.0.0.1:{pgbouncer}/{s['NAME']}",
        DATABASE_CONN_MAX_AGE="0",
        DATABASE_PREPARED_STATEMENTS="false",
        DATABASE_RANDOM_PAGE_COST="0",
        DATABASE_PLAN_CACHE_MODE="",
    )
    token = requests.post(
        f"{base}/api/v1/auth/token",
        json={"username": "bouncer", "password": "bouncer-password-1"},
        timeout=10,
    ).json()["access"]
    before = transactions(pgbouncer, s["NAME"])
    wrong: list[str] = []

    def client(n: int) -> None:
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {token}"
        for i in range(ROUNDS):
            name = f"bounced-{n}-{i}"
            body = {
                "name": name,
                "kind": "handler",
                "payload": {"name": "echo"},
                "schedule": {"type": "once", "delay": 3600},
            }
            created = session.post(f"{base}/api/v1/tasks", json=body, timeout=30)
            if created.status_code != 201:
                wrong.append(f"create {name}: {created.status_code} {created.text[:200]}")
                continue
            task = created.json()["id"]
            read = session.get(f"{base}/api/v1/tasks/{task}", timeout=30)
            if read.status_code != 200 or read.json()["name"] != name:
                wrong.append(f"read {name}: {read.status_code} {read.text[:200]}")
            listed = session.get(f"{base}/api/v1/tasks", params={"search": name}, timeout=30)
            if listed.status_code != 200:
                wrong.append(f"list {name}: {listed.status_code} {listed.text[:200]}")

    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert wrong == []
    # Each create, read and list is at least one transaction, all through PgBouncer.
    assert transactions(pgbouncer, s["NAME"]) - before >= 3 * CLIENTS * ROUNDS
