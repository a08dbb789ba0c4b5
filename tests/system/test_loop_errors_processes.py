"""Real role processes whose pass fails with an unexpected error: logged, counted in /metrics,
and the process goes on."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import override_settings

from tasks.models import Process, Run
from tests.conftest import wait_for
from tests.factories import RunFactory, TaskFactory
from tests.scheduler_project.web.test_metrics import scrape, value

pytestmark = pytest.mark.processes
NOOP = {"name": "noop", "args": {}}


def loop_errors(client, role: str) -> float | None:
    return value(scrape(client), "scheduler_loop_errors_total", role=role)


@override_settings(SCHEDULER_METRICS_TOKEN="")
def test_the_worker_logs_counts_and_survives_a_pass_that_fails(processes, client) -> None:
    # A row the worker cannot read: a payload nested deeper than Python's JSON decoder recurses
    # (PostgreSQL stores it; the API would not have accepted it). Its claim commits, then
    # decoding the claimed row raises RecursionError, an error no database handling expects.
    assert loop_errors(client, "worker") == 0
    unreadable = RunFactory(task=TaskFactory(payload=NOOP))
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE tasks_task SET payload = (repeat('[', 5000) || repeat(']', 5000))::jsonb"
            " WHERE id = %s",
            [unreadable.task_id],
        )
    worker = processes.start("runworker", "--concurrency", "2")

    wait_for(lambda: loop_errors(client, "worker"), timeout=60, details=processes.logs)
    assert worker.poll() is None, processes.logs()
    logs = processes.logs()
    assert "pass failed" in logs and "Traceback" in logs and "RecursionError" in logs

    # The loop went on: the same process runs what comes next.
    later = RunFactory(task=TaskFactory(payload=NOOP))
    wait_for(
        lambda: Run.objects.get(pk=later.pk).status == "succeeded",
        timeout=60,
        details=processes.logs,
    )
    assert worker.poll() is None
    assert loop_errors(client, "worker") == 1
    # The run it claimed and could not read is left to the reviewer's rescue.
    assert Run.objects.get(pk=unreadable.pk).status == "running"


@override_settings(SCHEDULER_METRICS_TOKEN="")
def test_the_reviewer_counts_a_failing_statement_and_goes_on(processes, client) -> None:
    # Each pass begins with the process's heartbeat row; a trigger makes that statement fail
    # (an error raised by the database, not a lost connection) until it is dropped.
    with connection.cursor() as cursor:
        cursor.execute(REFUSE_REVIEWER_BEATS)
    try:
        reviewer = processes.start("runreviewer")
        wait_for(lambda: loop_errors(client, "reviewer"), timeout=60, details=processes.logs)
        assert reviewer.poll() is None, processes.logs()
        assert not Process.objects.filter(role="reviewer").exists()
    finally:
        with connection.cursor() as cursor:
            cursor.execute(ALLOW_REVIEWER_BEATS)

    wait_for(
        lambda: Process.objects.filter(role="reviewer", stopped_at=None).exists(),
        timeout=60,
        details=processes.logs,
    )
    assert reviewer.poll() is None
    assert loop_errors(client, "reviewer") >= 1 and loop_errors(client, "worker") == 0
    assert "heartbeats refused" in processes.logs()


REFUSE_REVIEWER_BEATS = """
CREATE FUNCTION test_refuse_reviewer_beat() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'heartbeats refused for this test';
END
$$;
CREATE TRIGGER test_refuse_reviewer_beat BEFORE INSERT ON tasks_process FOR EACH ROW
    WHEN (NEW.role = 'reviewer') EXECUTE FUNCTION test_refuse_reviewer_beat();
"""
ALLOW_REVIEWER_BEATS = """
DROP TRIGGER test_refuse_reviewer_beat ON tasks_process;
DROP FUNCTION test_refuse_reviewer_beat();
"""
