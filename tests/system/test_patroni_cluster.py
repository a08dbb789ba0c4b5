"""The Patroni rig (bench/patroni_cluster.py) and our database settings on it.

From an empty folder to a healthy synchronous cluster, our multi-host URLs land where they
should (writes on the leader, the API's reads on a standby), and stopping leaves no process.
"""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection
from django.db.utils import load_backend

from bench.patroni_cluster import PatroniCluster, can_run
from scheduler_project.database import databases
from tests.conftest import wait_for

pytestmark = [
    pytest.mark.chaos,
    pytest.mark.processes,
    pytest.mark.skipif(not can_run(), reason="needs Debian's patroni, etcd and PostgreSQL 15"),
]


def where(settings: dict, alias: str, django_db_blocker) -> tuple[int, bool]:
    config = {**connection.settings_dict, **settings}
    wrapper = load_backend(config["ENGINE"]).DatabaseWrapper(config, alias)
    with django_db_blocker.unblock():
        try:
            with wrapper.cursor() as cursor:
                cursor.execute("SELECT inet_server_port(), pg_is_in_recovery()")
                return cursor.fetchone()
        finally:
            wrapper.close()


def test_a_synchronous_cluster_comes_up_and_our_urls_find_their_nodes(django_db_blocker):
    cluster = PatroniCluster()
    try:
        cluster.start()
        leader = cluster.healthy()
        assert leader is not None
        states = cluster.replication(leader)
        assert [s for _, s, _ in states] == ["streaming", "streaming"]
        assert sorted(sync for _, _, sync in states) == ["async", "sync"]
        assert leader.sql("SHOW synchronous_standby_names") != [("",)]

        settings = databases(
            cluster.url(), cluster.replica_url(), conn_max_age=0, application_name="rig-test"
        )
        assert where(settings["default"], "default", django_db_blocker) == (
            leader.pg_port,
            False,
        )
        port, in_recovery = where(settings["replica"], "replica", django_db_blocker)
        assert in_recovery and port != leader.pg_port
        pids = cluster.pids()
        # etcd, three Patroni and three postmasters at least (their children too).
        assert len(pids) >= 7
    finally:
        cluster.stop()
    assert cluster.pids() == []
    assert not cluster.root.exists()


def test_a_standby_read_outlives_the_vacuum_of_the_rows_it_reads() -> None:
    """hot_standby_feedback: a read on a standby holds back the primary's cleanup of the rows
    its snapshot still sees, so replaying that cleanup does not cancel it (without it, the
    standby cancels the read once replay has waited max_standby_streaming_delay, and the API
    answers 503)."""
    cluster = PatroniCluster()
    try:
        cluster.start()
        leader = cluster.healthy()
        assert leader is not None
        standby = next(m for m in cluster.members if m is not leader)
        # Replay waits 1 s, not 30, before cancelling a conflicting read: the test stays short.
        standby.sql("ALTER SYSTEM SET max_standby_streaming_delay = '1s'")
        standby.sql("SELECT pg_reload_conf()")
        leader.sql("CREATE TABLE feedback AS SELECT g FROM generate_series(1, 1000) g")

        def replayed(lsn: str) -> bool:
            return standby.sql(f"SELECT pg_last_wal_replay_lsn() >= '{lsn}'::pg_lsn") == [(True,)]

        ((created,),) = leader.sql("SELECT pg_current_wal_lsn()")
        wait_for(lambda: replayed(created), timeout=10)
        with psycopg.connect(standby.dsn, connect_timeout=5) as reader:
            # One snapshot for the transaction: the second count must see the deleted rows.
            reader.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            assert reader.execute("SELECT count(*) FROM feedback").fetchone() == (1000,)
            # The standbys' horizons have reached the primary (Patroni's replication slots
            # hold them) before the rows are deleted.
            wait_for(
                lambda: (
                    leader.sql("SELECT count(*) FROM pg_replication_slots WHERE xmin IS NOT NULL")
                    == [(len(cluster.members) - 1,)]
                ),
                timeout=15,
            )
            leader.sql("DELETE FROM feedback")
            leader.sql("VACUUM feedback")
            ((vacuumed,),) = leader.sql("SELECT pg_current_wal_lsn()")
            wait_for(lambda: replayed(vacuumed), timeout=10)
            assert reader.execute("SELECT count(*) FROM feedback").fetchone() == (1000,)
            reader.rollback()
    finally:
        cluster.stop()
    assert cluster.pids() == []
