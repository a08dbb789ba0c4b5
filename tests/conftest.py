"""Shared fixtures: API clients with tokens, and real role processes on the test database; under
SCHEDULER_TEST_PGBOUNCER=1 the tests' connections go through PgBouncer in transaction mode."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests
from django.conf import settings
from django.db import connection, connections
from rest_framework.test import APIClient
from rest_framework_simplejwt.tokens import RefreshToken

from scheduler_project.database import database_url as scheduler_database_url
from tests import pgbouncer
from tests.factories import UserFactory

ROOT = Path(__file__).resolve().parent.parent
# `make test-pgbouncer`: the test database is reached through PgBouncer 1.18 in transaction
# pooling mode, as an API behind one reaches it (docs/operations.md, PgBouncer).
THROUGH_PGBOUNCER = os.environ.get("SCHEDULER_TEST_PGBOUNCER") == "1"
PGBOUNCER_SUMMARY: list[str] = []  # written at the end (a fixture's teardown output is captured)


def pytest_configure(config: pytest.Config) -> None:
    if not THROUGH_PGBOUNCER:
        return
    s = settings.DATABASES["default"]
    if not s["HOST"] or s["HOST"].startswith("/") or "," in s["HOST"]:
        raise pytest.UsageError("SCHEDULER_TEST_PGBOUNCER=1 needs DATABASE_URL on one TCP host")
    # What an API behind PgBouncer 1.18 must be given (docs/operations.md, PgBouncer): nothing
    # prepared, and no session SET that would reach only the server connection that ran it.
    if s.get("PREPARED_STATEMENTS", True) or s.get("RANDOM_PAGE_COST") or s.get("PLAN_CACHE_MODE"):
        raise pytest.UsageError(
            "SCHEDULER_TEST_PGBOUNCER=1 needs DATABASE_PREPARED_STATEMENTS=false, "
            "DATABASE_RANDOM_PAGE_COST=0 and an empty DATABASE_PLAN_CACHE_MODE"
        )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Through PgBouncer, skip the tests marked `not_through_pgbouncer` (with the mark's reason)."""
    if not THROUGH_PGBOUNCER:
        return
    for item in items:
        mark = item.get_closest_marker("not_through_pgbouncer")
        if mark is not None:
            reason = mark.kwargs.get("reason") or (mark.args[0] if mark.args else "")
            item.add_marker(pytest.mark.skip(reason=f"not through PgBouncer: {reason}"))


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    for line in PGBOUNCER_SUMMARY:
        terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None, django_db_blocker) -> Iterator[None]:
    """pytest-django's test database; under SCHEDULER_TEST_PGBOUNCER=1 every connection to it
    goes through a PgBouncer in transaction mode for the session. pytest-django creates and drops
    the database directly (DROP DATABASE fails while PgBouncer holds server connections to it)."""
    if not THROUGH_PGBOUNCER:
        yield
        return
    s = connection.settings_dict
    server = {alias: connections[alias].settings_dict.copy() for alias in connections}
    with pgbouncer.pgbouncer(
        server_host=s["HOST"], server_port=s["PORT"], user=s["USER"], port=free_port()
    ) as port:
        connections.close_all()
        for alias in server:
            connections[alias].settings_dict.update(HOST="127.0.0.1", PORT=str(port))
        try:
            yield
        finally:
            carried = pgbouncer.transactions(port, s["USER"], s["NAME"])
            with django_db_blocker.unblock():
                connections.close_all()
            for alias, before in server.items():
                connections[alias].settings_dict.update(HOST=before["HOST"], PORT=before["PORT"])
    # Its server connections end with it; the drop that follows needs them gone.
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        wait_for(lambda: not backends_of(cursor, s["NAME"]), timeout=10)
    connections.close_all()
    PGBOUNCER_SUMMARY.append(f"PgBouncer carried {carried} transactions to {s['NAME']}")


def backends_of(cursor, database: str) -> int:
    cursor.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
        [database],
    )
    return cursor.fetchone()[0]


@pytest.fixture
def user(db):
    return UserFactory()


@pytest.fixture
def other_user(db):
    return UserFactory()


def client_for(user) -> APIClient:
    client = APIClient()
    token = RefreshToken.for_user(user).access_token
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


@pytest.fixture
def api(user) -> APIClient:
    return client_for(user)


@pytest.fixture
def other_api(other_user) -> APIClient:
    return client_for(other_user)


@pytest.fixture
def anon() -> APIClient:
    return APIClient()


def database_url() -> str:
    """A URL for the database the tests use (the test database, once pytest-django made it)."""
    return scheduler_database_url(connection.settings_dict)


def process_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=database_url(),
        SECRET_KEY="test-secret-key-for-role-processes-0123456789",
        SCHEDULER_TESTING="true",
        PYTHONUNBUFFERED="1",
        LOG_LEVEL="INFO",
    )
    env.update(extra)
    return env


class Processes:
    """Starts `manage.py` role processes; stops them all (SIGTERM, then SIGKILL) at teardown."""

    def __init__(self, logdir: Path) -> None:
        self.logdir = logdir
        self.started: list[subprocess.Popen] = []

    def start(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        log = (self.logdir / f"{args[0]}-{len(self.started)}.log").open("wb")
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "manage.py"), *args],
            cwd=ROOT,
            env=env or process_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.started.append(proc)
        return proc

    def stop_all(self) -> None:
        for proc in self.started:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.started:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace")[-3000:] for p in self.logdir.glob("*.log"))


@pytest.fixture
def processes(transactional_db, tmp_path) -> Iterator[Processes]:
    procs = Processes(tmp_path)
    yield procs
    procs.stop_all()


def wait_for(
    predicate: Callable[[], object],
    *,
    timeout: float,
    interval: float = 0.1,
    details: Callable[[], str] | None = None,
) -> object:
    """Poll `predicate` until it returns something truthy; fail the test after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            extra = f"\n{details()}" if details else ""
            raise AssertionError(f"condition not met within {timeout}s{extra}")
        time.sleep(interval)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now, for a server a test starts."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_api(
    base: str, *, timeout: float = 60, details: Callable[[], str] | None = None
) -> str:
    """Wait until the API at `base` answers /health/live; returns `base`."""

    def up() -> bool:
        try:
            return requests.get(f"{base}/health/live", timeout=5).status_code == 200
        except requests.RequestException:  # not listening yet, or still booting
            return False

    wait_for(up, timeout=timeout, interval=0.2, details=details)
    return base
