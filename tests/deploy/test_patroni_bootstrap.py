"""The Patroni configuration docker-compose.ha.yml ships (deploy/ha/patroni/), run for real: a
node started from patroni.yml, only its addresses and paths made local, with its passwords in
the environment as the compose file gives them, bootstraps a cluster whose post-bootstrap
script made the role and database the scheduler logs in to, with a password: in the URL (the
compose file) or, the URL holding none, as PGPASSWORD (deploy/kubernetes/cloudnative-pg)."""

from __future__ import annotations

import json
import shutil

import psycopg
import pytest
import requests
import yaml
from django.db import connection
from django.db.utils import load_backend

from bench.patroni_cluster import Member, PatroniCluster, can_run
from scheduler_project.database import databases
from tests.conftest import ROOT

PATRONI = ROOT / "deploy" / "ha" / "patroni"
PASSWORD = "scheduler-pw-'quoted'"  # psql must quote it, not splice it

pytestmark = [
    pytest.mark.processes,
    pytest.mark.skipif(not can_run(), reason="needs Debian's patroni, etcd and PostgreSQL 15"),
]


class ShippedConfig(PatroniCluster):
    def _write_config(self, member: Member) -> None:
        config = yaml.safe_load((PATRONI / "patroni.yml").read_text())
        script = self.root / "post-bootstrap.sh"  # where the postgres user can reach it
        shutil.copy(PATRONI / "post-bootstrap.sh", script)
        script.chmod(0o755)
        config["bootstrap"]["post_bootstrap"] = str(script)
        api = f"127.0.0.1:{member.api_port}"
        config["restapi"] = {"listen": api, "connect_address": api}
        config["etcd"]["hosts"] = [f"127.0.0.1:{self.etcd_port}"]
        address = f"127.0.0.1:{member.pg_port}"
        config["postgresql"].update(
            listen=address,
            connect_address=address,
            data_dir=str(member.data),
            pgpass=str(self.root / f"{member.name}.pgpass"),
            parameters={"unix_socket_directories": str(self.root)},
        )
        member.config.write_text(json.dumps(config))


def whoami(url: str, django_db_blocker) -> tuple[str, str]:
    """current_user and current_database() of a connection our settings make from `url`."""
    ours = databases(url, "", conn_max_age=0, application_name="bootstrap-test")["default"]
    config = {**connection.settings_dict, **ours}  # Django's defaults (TIME_ZONE, ...) too
    wrapper = load_backend(config["ENGINE"]).DatabaseWrapper(config, "bootstrap")
    with django_db_blocker.unblock():
        try:
            with wrapper.cursor() as cursor:
                cursor.execute("SELECT current_user, current_database()")
                return cursor.fetchone()
        finally:
            wrapper.close()


def test_the_shipped_config_bootstraps_the_schedulers_database(
    monkeypatch, django_db_blocker
) -> None:
    monkeypatch.setenv("PATRONI_NAME", "pg1")
    monkeypatch.setenv("PATRONI_SUPERUSER_PASSWORD", "superuser-pw")
    monkeypatch.setenv("PATRONI_REPLICATION_PASSWORD", "replicator-pw")
    monkeypatch.setenv("SCHEDULER_DB_PASSWORD", PASSWORD)
    cluster = ShippedConfig(members=1)
    [member] = cluster.members
    try:
        cluster._start_etcd()
        cluster._write_config(member)
        cluster.start_member(member)
        cluster._wait(cluster.leader, 60, "no leader")
        login = dict(host="127.0.0.1", port=member.pg_port, connect_timeout=5)

        with psycopg.connect(**login, user="scheduler", password=PASSWORD, dbname="scheduler") as c:
            row = c.execute(
                "SELECT current_user, d.datdba::regrole::text, current_setting('wal_log_hints')"
                " FROM pg_database d WHERE d.datname = current_database()"
            ).fetchone()
        assert row == ("scheduler", "scheduler", "on")
        # Passwords are checked (scram-sha-256), not trusted.
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            psycopg.connect(**login, user="scheduler", password="wrong", dbname="scheduler")
        # Our settings: the password in the URL, or only in PGPASSWORD (libpq reads it).
        hosts = f"127.0.0.1:{member.pg_port}"
        quoted = PASSWORD.replace("'", "%27")
        assert whoami(f"postgres://scheduler:{quoted}@{hosts}/scheduler", django_db_blocker) == (
            "scheduler",
            "scheduler",
        )
        monkeypatch.setenv("PGPASSWORD", PASSWORD)
        assert whoami(f"postgres://scheduler@{hosts}/scheduler", django_db_blocker) == (
            "scheduler",
            "scheduler",
        )
        # The cluster-wide settings went to etcd as written.
        dynamic = requests.get(f"http://127.0.0.1:{member.api_port}/config", timeout=5).json()
        assert (dynamic["ttl"], dynamic["loop_wait"], dynamic["retry_timeout"]) == (10, 2, 4)
        assert dynamic["synchronous_mode"] is True
    finally:
        cluster.stop()
    assert cluster.pids() == []
