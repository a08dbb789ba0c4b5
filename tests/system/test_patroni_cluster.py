"""The Patroni rig (bench/patroni_cluster.py) and our database settings on it.

From an empty folder to a healthy synchronous cluster, our multi-host URLs land where they
should (writes on the leader, the API's reads on a standby), and stopping leaves no process.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.utils import load_backend

from bench.patroni_cluster import PatroniCluster, can_run
from scheduler_project.database import databases

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
