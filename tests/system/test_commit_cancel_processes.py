"""No interrupt of our processes cancels a commit waiting for the synchronous standby.

A primary with a synchronous standby (tests/tasks/pg_pair.py) whose standby is paused, so every
commit waits. A process commits through our database backend and is interrupted the ways our
processes are (Ctrl-C's KeyboardInterrupt; the SystemExit of a second stop signal or of
gunicorn's quit and timeout handlers). The row must stay invisible until the standby has it:
a cancelled wait would show it at once and lose it in a failover. The same commit through a plain
psycopg connection shows what the backend prevents.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import pytest

from bench.patroni_cluster import children, signal_pid
from tests.conftest import ROOT, process_env, wait_for
from tests.tasks.pg_pair import PrimaryStandby, can_run

pytestmark = [
    pytest.mark.processes,
    pytest.mark.skipif(not can_run(), reason="needs PostgreSQL's server binaries (pg_ctl)"),
]

COMMIT = textwrap.dedent(
    """
    import os, signal, sys
    import django
    django.setup()
    from django.db import connection, transaction

    if sys.argv[1] == "SIGTERM":  # as gunicorn's quit handler and our second stop signal do
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    if sys.argv[2] == "plain":
        import psycopg
        with psycopg.connect(os.environ["PLAIN_DSN"], autocommit=True) as conn:
            print("committing", flush=True)
            conn.execute("INSERT INTO commit_probe VALUES (1)")
    else:
        with transaction.atomic():
            connection.cursor().execute("INSERT INTO commit_probe VALUES (1)")
            print("committing", flush=True)
    print("committed", flush=True)
    """
)


def postgres_pids(data) -> list[int]:
    postmaster = int((data / "postmaster.pid").read_text().split("\n", 1)[0])
    return [postmaster, *children(postmaster)]


@pytest.fixture(scope="module")
def pair():
    pair = PrimaryStandby()
    try:
        pair.start()
        pair.primary.sql("CREATE TABLE commit_probe (id int)")
        yield pair
    finally:
        pair.stop()


@pytest.mark.parametrize(
    ("interrupt", "connection", "cancelled"),
    [
        ("SIGINT", "ours", False),
        ("SIGTERM", "ours", False),
        ("SIGINT", "plain", True),  # psycopg's own: the wait is cancelled, the row shows
    ],
)
def test_an_interrupted_commit_waits_for_the_standby(
    pair, tmp_path, interrupt, connection, cancelled
):
    primary, standby = pair.primary, pair.standby
    primary.sql("TRUNCATE commit_probe")
    log_before = primary.log.read_text(errors="replace")
    paused = postgres_pids(standby.data)
    for pid in paused:
        signal_pid(pid, signal.SIGSTOP)
    try:
        env = process_env(
            DATABASE_URL=pair.url,
            PLAIN_DSN=f"host=127.0.0.1 port={primary.port} user=postgres dbname=postgres",
        )
        out = tmp_path / "out.log"
        child = subprocess.Popen(
            [sys.executable, "-c", COMMIT, interrupt, connection],
            cwd=ROOT,
            env=env,
            stdout=out.open("wb"),
            stderr=subprocess.STDOUT,
        )
        wait_for(lambda: "committing" in out.read_text(), timeout=30, details=out.read_text)
        # The commit is waiting for the paused standby.
        wait_for(
            lambda: (
                primary.sql("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'")
                == [(1,)]
            ),
            timeout=10,
        )
        child.send_signal(getattr(signal, interrupt))
        child.wait(timeout=30)
        assert "committed" not in out.read_text()  # the process was interrupted, not told "done"
        time.sleep(0.5)
        visible = primary.sql("SELECT count(*) FROM commit_probe")[0][0]
        log = primary.log.read_text(errors="replace")[len(log_before) :]
        if cancelled:
            assert visible == 1 and "canceling wait for synchronous replication" in log
            return
        assert visible == 0, out.read_text()
        assert "canceling wait for synchronous replication" not in log
        assert "not cancelling a running statement" in out.read_text()
    finally:
        for pid in paused:
            signal_pid(pid, signal.SIGCONT)
    # The commit the client left completes once the standby has it.
    wait_for(lambda: primary.sql("SELECT count(*) FROM commit_probe") == [(1,)], timeout=20)
