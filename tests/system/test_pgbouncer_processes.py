"""The API behind Debian's PgBouncer (1.18) in transaction pooling mode.

PgBouncer before 1.21 cannot carry a prepared statement from one transaction to the next, so the
API runs with `DATABASE_PREPARED_STATEMENTS=false`, `DATABASE_CONN_MAX_AGE=0` (PgBouncer pools)
and no session settings (docs/operations.md, PgBouncer). Several clients at once create tasks and
read them back: every answer is the right one, and PgBouncer carried the transactions.
"""

from __future__ import annotations

import threading

import pytest
import requests
from django.contrib.auth import get_user_model
from django.db import connection

from bench.patroni_cluster import low_free_port
from tests import pgbouncer as bouncer
from tests.gunicorn_server import gunicorn  # noqa: F401  (the fixture, used by name)

pytestmark = [
    pytest.mark.processes,
    pytest.mark.skipif(not bouncer.available(), reason="needs pgbouncer, psql"),
]
CLIENTS, ROUNDS = 6, 15


@pytest.fixture
def pgbouncer():
    """A PgBouncer in transaction mode in front of the test database's server."""
    s = connection.settings_dict
    if not s["HOST"] or s["HOST"].startswith("/") or "," in s["HOST"]:
        pytest.skip("needs the test database on one TCP host")
    with bouncer.pgbouncer(
        server_host=s["HOST"], server_port=s["PORT"], user=s["USER"], port=low_free_port()
    ) as port:
        yield port


def transactions(port: int, database: str) -> int:
    return bouncer.transactions(port, connection.settings_dict["USER"], database)


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
