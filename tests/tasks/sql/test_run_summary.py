"""A finished run's summary is kept on the run by the database (tasks/sql/run_summary.sql):
written when it finishes, however it finishes, dropped when it runs again, and always what DRF
would write for it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson
import pytest
from django.db import connection

from tasks.api.run_serializers import RunSummarySerializer
from tasks.models import TERMINAL_STATUSES, Run
from tests.factories import RunFactory, TaskFactory

pytestmark = pytest.mark.django_db

BASE = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _stored(run: Run) -> str | None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT summary FROM tasks_run WHERE id = %s", [run.pk])
        return cursor.fetchone()[0]


def _as_drf(run: Run) -> dict:
    return dict(RunSummarySerializer(Run.objects.get(pk=run.pk)).data)


def _update(run: Run, sql: str, params: dict | None = None) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE tasks_run SET {sql} WHERE id = %(id)s", {"id": run.pk, **(params or {})}
        )


def test_a_run_has_a_summary_exactly_while_it_is_finished():
    run = RunFactory(task=TaskFactory(), scheduled_at=BASE)
    assert _stored(run) is None
    _update(
        run,
        "status = 'running', attempt = 1, worker = 'w', started_at = %(at)s, heartbeat_at = %(at)s",
        {"at": BASE + timedelta(microseconds=1200)},
    )
    assert _stored(run) is None
    _update(run, "heartbeat_at = clock_timestamp()")
    assert _stored(run) is None
    _update(run, "status = 'failed', finished_at = %(at)s", {"at": BASE + timedelta(seconds=2)})
    assert orjson.loads(_stored(run)) == _as_drf(run)
    assert orjson.loads(_stored(run))["status"] == "failed"
    # Retried from the dead letters: running again, so no summary until it finishes again.
    _update(run, "status = 'scheduled', finished_at = NULL, worker = ''")
    assert _stored(run) is None
    _update(
        run,
        "status = 'running', attempt = 2, worker = 'w', started_at = %(at)s, heartbeat_at = %(at)s",
        {"at": BASE + timedelta(seconds=5)},
    )
    _update(run, "status = 'succeeded', finished_at = %(at)s", {"at": BASE + timedelta(seconds=6)})
    summary = orjson.loads(_stored(run))
    assert summary == _as_drf(run) and summary["attempt"] == 2 and summary["status"] == "succeeded"


@pytest.mark.parametrize("status", TERMINAL_STATUSES)
def test_a_run_written_finished_has_its_summary(status):
    run = RunFactory(
        task=TaskFactory(),
        scheduled_at=BASE + timedelta(microseconds=7),
        status=status,
        finished_at=BASE + timedelta(seconds=1),
    )
    assert orjson.loads(_stored(run)) == _as_drf(run)


def test_a_summary_cannot_be_written_wrong():
    run = RunFactory(task=TaskFactory(), scheduled_at=BASE, status="skipped", finished_at=BASE)
    _update(run, 'summary = \'{"status": "succeeded"}\'')
    assert orjson.loads(_stored(run)) == _as_drf(run)
    pending = RunFactory(task=TaskFactory(), scheduled_at=BASE)
    _update(pending, "summary = 'stale'")
    assert _stored(pending) is None


def test_bulk_loads_with_replication_role_replica_keep_summaries_too():
    task = TaskFactory()
    with connection.cursor() as cursor:
        cursor.execute("SET session_replication_role = replica")
        try:
            run = RunFactory(task=task, scheduled_at=BASE, status="cancelled", finished_at=BASE)
        finally:
            cursor.execute("RESET session_replication_role")
    assert orjson.loads(_stored(run)) == _as_drf(run)


def test_the_finished_runs_of_a_list_page_are_read_from_their_summaries(api, user):
    task = TaskFactory(owner=user)
    done = RunFactory(
        task=task,
        scheduled_at=BASE,
        status="succeeded",
        attempt=1,
        started_at=BASE,
        finished_at=BASE + timedelta(seconds=1),
    )
    # A summary written before a change the triggers could not see (one that predates them)
    # is what the page shows: the page reads the stored summary, not the columns.
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # ALTER TABLE wants no deferred checks
        cursor.execute("ALTER TABLE tasks_run DISABLE TRIGGER run_summary_on_update")
        cursor.execute(
            "UPDATE tasks_run SET summary = replace(summary, '\"attempt\":1', "
            "'\"attempt\":7') WHERE id = %s",
            [done.pk],
        )
        cursor.execute("ALTER TABLE tasks_run ENABLE ALWAYS TRIGGER run_summary_on_update")
    (shown,) = api.get("/api/v1/tasks").json()["results"][0]["runs"]
    assert shown["attempt"] == 7
