"""A statement hung past its bound is given up without a cancel: the caller gets a lost
connection, the server's statement goes on, and the host goes last in new connections' lists
(the process-level case, an orphaned Patroni primary, is tests/system/test_patroni_faults.py)."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection

from scheduler_project.postgresql import hung
from tasks.db import connect


@pytest.fixture(autouse=True)
def nothing_avoided():  # type: ignore[no-untyped-def]
    hung._avoided.clear()
    yield
    hung._avoided.clear()


def test_avoided_hosts_go_last_and_the_others_keep_their_order() -> None:
    hung.avoid("db1", "5432")

    assert hung.order_hosts("db1,db2,db3", "5432,5433,5434") == ("db2,db3,db1", "5433,5434,5432")
    assert hung.order_hosts("db1,db2", "5432") == ("db2,db1", "5432,5432")
    assert hung.order_hosts("db1,db2", "") == ("db1,db2", "")  # db1 on 5432 only
    assert hung.order_hosts("db1", "5432") == ("db1", "5432")


def test_an_avoided_host_is_tried_again_after_a_while() -> None:
    hung.avoid("db1", "5432", seconds=-1)

    assert hung.order_hosts("db1,db2", "5432,5433") == ("db1,db2", "5432,5433")


@pytest.mark.django_db(transaction=True)
def test_django_connections_list_an_avoided_host_last() -> None:
    saved = {key: connection.settings_dict[key] for key in ("HOST", "PORT")}
    host, port = saved["HOST"] or "localhost", str(saved["PORT"] or 5432)
    try:
        connection.settings_dict.update(HOST=f"{host},elsewhere", PORT=f"{port},{port}")
        assert connection.get_connection_params()["host"] == f"{host},elsewhere"
        hung.avoid(host, port)
        params = connection.get_connection_params()
    finally:
        connection.settings_dict.update(saved)

    assert (params["host"], params["port"]) == (f"elsewhere,{host}", f"{port},{port}")


@pytest.mark.django_db(transaction=True)
def test_a_hung_statement_fails_as_a_lost_connection_and_is_not_cancelled() -> None:
    conn = connect("hung-test")
    watcher = connect("hung-test-watcher")
    pid, where = conn.info.backend_pid, (conn.info.host, str(conn.info.port))
    try:
        with (
            pytest.raises(psycopg.OperationalError),
            hung.abandon_if_hung(lambda: conn, 0.5, what="test sleep"),
        ):
            conn.execute("SELECT pg_sleep(30)")
        # Not cancelled: the server still runs it (a cancel would have ended it at once).
        [(state, query)] = watcher.execute(
            "SELECT state, query FROM pg_stat_activity WHERE pid = %s", [pid]
        ).fetchall()
        assert (state, query) == ("active", "SELECT pg_sleep(30)")
        assert where in hung.avoided()
    finally:
        watcher.execute("SELECT pg_terminate_backend(%s)", [pid])
        conn.close()
        watcher.close()


@pytest.mark.django_db(transaction=True)
def test_a_statement_within_its_bound_is_left_alone() -> None:
    conn = connect("hung-test")
    try:
        with hung.abandon_if_hung(lambda: conn, 5.0):
            assert conn.execute("SELECT pg_sleep(0.3), 1").fetchone()[1] == 1
        assert conn.execute("SELECT 2").fetchone()[0] == 2
        assert hung.avoided() == set()
    finally:
        conn.close()
