"""Database failover in process: multi-host URLs, connections to a read-only server dropped, a
database that cannot be reached answered 503 with Retry-After (tests/system/test_failover.py does
it all with real processes and a real failover)."""

from __future__ import annotations

import json
import select
import socket
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.db.backends.postgresql.base import DatabaseWrapper as DjangoWrapper
from django.db.utils import load_backend
from django.test import Client

from scheduler_project.database import database_config, database_url
from scheduler_project.postgresql.base import HEALTH_CHECK_REUSE_SECONDS
from scheduler_project.web.health import health_report
from tasks.db import is_unavailable
from tasks.models import Run
from tasks.transitions import claim
from tasks.transitions.rescue import rescue_stuck_runs
from tests.factories import RunFactory, TaskFactory, UserFactory
from tests.scheduler_project.test_settings_production import python_setting


def test_several_hosts_keep_their_own_ports_and_the_session_attributes() -> None:
    config = database_config(
        "postgresql://app:s%40cret@db1:5432,db2:5433/sched?target_session_attrs=read-write"
    )

    assert (config["HOST"], config["PORT"]) == ("db1,db2", "5432,5433")
    assert (config["NAME"], config["USER"], config["PASSWORD"]) == ("sched", "app", "s@cret")
    assert config["OPTIONS"]["target_session_attrs"] == "read-write"
    assert config["ENGINE"] == "scheduler_project.postgresql"


@pytest.mark.parametrize(
    ("netloc", "host", "port"),
    [
        ("db1,db2:5433", "db1,db2", ",5433"),  # django-environ gives 5433 to both
        ("db1:5432,db2", "db1,db2", "5432,"),  # an empty entry is libpq's default port
        ("[::1]:5432,[fd00::2]:5433", "::1,fd00::2", "5432,5433"),  # no brackets for libpq
        ("db1", "db1", ""),
        ("db1:6432", "db1", "6432"),
        ("%2Fvar%2Frun%2Fpostgresql", "/var/run/postgresql", ""),  # a socket directory
    ],
)
def test_host_lists(netloc: str, host: str, port: str) -> None:
    config = database_config(f"postgres://u@{netloc}/db")

    assert (config["HOST"], config["PORT"]) == (host, port)


def test_connection_defaults_apply_unless_the_url_sets_them() -> None:
    options = database_config("postgres://u@db1,db2/db?connect_timeout=2")["OPTIONS"]

    assert options["connect_timeout"] == 2
    assert options["keepalives_idle"] == 10


def test_database_url_round_trips() -> None:
    url = "postgres://u:p%2Fw@db1:5432,%2Ftmp,[::1]:5433/db?target_session_attrs=primary"

    config = database_config(url)

    assert database_config(database_url(config)) == config


def test_a_replica_url_of_several_standbys_does_not_inherit_read_write() -> None:
    primary = "postgres://postgres@db1:5432,db2:5432/sched?target_session_attrs=read-write"
    replica = "postgres://postgres@db2:5432,db1:5432/sched?target_session_attrs=prefer-standby"

    result = python_setting(
        "__import__('json').dumps(settings.DATABASES)",
        DATABASE_URL=primary,
        DATABASE_REPLICA_URL=replica,
        SECRET_KEY="x" * 40,
    )

    databases = json.loads(result.stdout)
    assert databases["default"]["OPTIONS"]["target_session_attrs"] == "read-write"
    assert databases["replica"]["OPTIONS"]["target_session_attrs"] == "prefer-standby"
    assert (databases["replica"]["HOST"], databases["replica"]["PORT"]) == ("db2,db1", "5432,5432")


def dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # closed again: nothing listens there


def wrapper(url: str, alias: str = "default") -> DjangoWrapper:
    config = {**connection.settings_dict, **database_config(url)}
    return load_backend(config["ENGINE"]).DatabaseWrapper(config, alias)


def server_identity(conn) -> tuple[datetime, str]:
    with conn.cursor() as cursor:
        cursor.execute("SELECT pg_postmaster_start_time(), current_database()")
        return cursor.fetchone()


def test_libpq_skips_a_dead_host_for_the_next(db) -> None:
    s = connection.settings_dict
    # The test database's own host and port (a socket directory and no port, for the embedded
    # server), after a port that nothing listens on.
    hosts = {"HOST": f"127.0.0.1,{s['HOST']}", "PORT": f"{dead_port()},{s['PORT'] or ''}"}
    conn = wrapper(database_url({**s, **hosts}) + "?target_session_attrs=read-write")
    try:
        assert server_identity(conn) == server_identity(connection)
    finally:
        conn.close()


@pytest.mark.parametrize(("alias", "usable"), [("default", False), ("replica", True)])
def test_a_primary_connection_that_turned_read_only_is_unusable(db, alias, usable) -> None:
    conn = wrapper(database_url(connection.settings_dict), alias)
    try:
        with conn.cursor() as cursor:
            assert conn.is_usable()
            # What a fenced primary does (ALTER SYSTEM + reload); a standby reports in_hot_standby.
            cursor.execute("SET default_transaction_read_only = on")
        assert conn.is_usable() is usable
    finally:
        conn.close()


@pytest.mark.parametrize(("opened_on_standby", "usable"), [(True, False), (False, True)])
def test_a_replica_connection_whose_standby_was_promoted_is_unusable(
    db, opened_on_standby, usable
) -> None:
    # The test server is a primary: its answers say in_hot_standby off, as a promoted standby's
    # do. A connection that opened on a standby must go and find one again; one that found only
    # the primary (prefer-standby's fallback) keeps it.
    conn = wrapper(database_url(connection.settings_dict), "replica")
    try:
        conn.ensure_connection()
        assert conn.opened_on_standby is False  # what the server said when it opened
        conn.opened_on_standby = opened_on_standby
        conn.checked_at -= HEALTH_CHECK_REUSE_SECONDS  # the full check, which reads its answer
        assert conn.is_usable() is usable
    finally:
        conn.close()


def test_a_connection_checked_within_a_second_and_quiet_since_needs_no_round_trip(
    db, monkeypatch
) -> None:
    checks: list[str] = []
    full_check = DjangoWrapper.is_usable
    monkeypatch.setattr(
        DjangoWrapper, "is_usable", lambda self: checks.append(self.alias) or full_check(self)
    )
    conn = wrapper(database_url(connection.settings_dict))
    try:
        conn.ensure_connection()  # a new connection has just answered
        assert conn.is_usable() and conn.is_usable()
        assert checks == []
        conn.checked_at -= HEALTH_CHECK_REUSE_SECONDS
        assert conn.is_usable() and conn.is_usable()
        assert checks == ["default"]  # the full check, then a second's grace again
    finally:
        conn.close()


def test_a_connection_the_server_ended_is_unusable_within_the_second(db) -> None:
    conn = wrapper(database_url(connection.settings_dict))
    try:
        conn.ensure_connection()
        assert conn.is_usable()
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [conn.connection.info.backend_pid])
        poller = select.poll()
        poller.register(conn.connection.fileno(), select.POLLIN)
        assert poller.poll(2000), "the ended connection never became readable"
        assert time.monotonic() - conn.checked_at < HEALTH_CHECK_REUSE_SECONDS
        assert conn.is_usable() is False
    finally:
        conn.close()


def test_read_only_and_lost_connection_errors_count_as_unavailable(db) -> None:
    conn = wrapper(database_url(connection.settings_dict))
    try:
        with pytest.raises(Exception) as read_only, conn.cursor() as cursor:
            cursor.execute("SET default_transaction_read_only = on")
            cursor.execute("CREATE TEMPORARY TABLE t (x int)")
        with pytest.raises(Exception) as bad_query, conn.cursor() as cursor:
            cursor.execute("SELECT 1/0")
    finally:
        conn.close()
    dead = wrapper(database_url({**connection.settings_dict, "PORT": str(dead_port())}))
    with pytest.raises(Exception) as refused:
        dead.ensure_connection()

    assert "read-only transaction" in str(read_only.value)
    assert is_unavailable(read_only.value) and is_unavailable(refused.value)
    assert not is_unavailable(bad_query.value)  # division by zero: a 500 stays a 500


@pytest.fixture
def database_down(transactional_db):
    """Django's connection pointed at a port nothing listens on, until the test ends."""
    port = connection.settings_dict["PORT"]

    def down() -> None:
        connection.close()
        connection.settings_dict["PORT"] = str(dead_port())

    yield down
    connection.close()
    connection.settings_dict["PORT"] = port


def test_the_api_answers_503_with_retry_after_while_the_database_is_down(database_down, api):
    body = {
        "name": "x",
        "kind": "handler",
        "payload": {"name": "echo"},
        "schedule": {"type": "once", "delay": 60},
    }
    database_down()

    response = api.post("/api/v1/tasks", body, format="json")

    assert response.status_code == 503
    assert response["Retry-After"] == "2"
    assert response.json()["code"] == "database_unavailable"


def test_outside_drf_views_too(database_down):
    client = Client(raise_request_exception=False)
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    database_down()

    response = client.get("/admin/")  # the session middleware reads the database

    assert response.status_code == 503
    assert response["Retry-After"] == "2"


@pytest.mark.django_db
def test_a_claim_whose_answer_was_lost_is_not_renewed_and_gets_rescued() -> None:
    # The primary died after committing a claim but before the worker heard of it: the run is
    # the worker's in the database, unknown to the worker. Renewing it would hold it forever.
    task = TaskFactory(max_attempts=3)
    runs = [
        RunFactory(task=task, scheduled_at=datetime.now(UTC) - timedelta(seconds=i))
        for i in range(2)
    ]
    claimed = claim.claim_runs(worker="w-a", limit=2, prefetch_seconds=0, owner_cap=100)
    assert {c.id for c in claimed} == {r.id for r in runs}
    Run.objects.update(heartbeat_at=datetime.now(UTC) - timedelta(minutes=5))

    with connection.cursor() as cursor:
        held = claim.renew_heartbeats(cursor, worker="w-a", run_ids=[runs[0].id])

    assert held == {runs[0].id}
    assert rescue_stuck_runs(after_seconds=60).rescued == 1
    statuses = dict(Run.objects.values_list("id", "status"))
    assert (statuses[runs[0].id], statuses[runs[1].id]) == ("running", "scheduled")


@pytest.mark.django_db
def test_health_reports_a_read_only_database_down() -> None:
    with connection.cursor() as cursor:  # what a standby or a fenced primary answers
        cursor.execute("SET LOCAL transaction_read_only = on")

    body, healthy = health_report()

    assert not healthy
    assert body["components"]["database"]["status"] == "down"
    assert "read-only" in body["components"]["database"]["error"]
    assert body["components"]["worker"]["error"] == "database unavailable"
