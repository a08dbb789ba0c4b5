"""Our connections (Django's, and tasks.db's dedicated ones) never send a cancel request: a
statement asked to stop runs to its end (the process-level case, a commit waiting for the
synchronous standby, is tests/system/test_commit_cancel_processes.py)."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from scheduler_project.postgresql.base import NeverCancelConnection
from tasks.db import connect


def cancel_during_sleep(raw) -> object:  # type: ignore[no-untyped-def]
    """Runs pg_sleep(1) on `raw` while another thread asks it to cancel (both ways psycopg
    offers); a cancelled statement would raise QueryCanceled."""

    def cancel() -> None:
        time.sleep(0.3)
        raw.cancel()
        raw.cancel_safe()

    canceller = threading.Thread(target=cancel)
    canceller.start()
    try:
        row = raw.execute("SELECT pg_sleep(1), 'done'").fetchone()[1]
    finally:
        canceller.join()
    return row


@pytest.mark.django_db
def test_a_django_connection_is_not_cancelled() -> None:
    connection.ensure_connection()
    raw = connection.connection
    assert isinstance(raw, NeverCancelConnection)
    assert cancel_during_sleep(raw) == "done"


@pytest.mark.django_db
def test_a_dedicated_connection_is_not_cancelled() -> None:
    raw = connect("never-cancel-test")
    try:
        assert isinstance(raw, NeverCancelConnection)
        assert cancel_during_sleep(raw) == "done"
    finally:
        raw.close()
