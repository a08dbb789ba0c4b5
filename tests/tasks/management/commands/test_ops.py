"""`manage.py ops`: readable tables, and actions through the services."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from tasks.models import Run
from tests.factories import RunFactory, TaskFactory, UserFactory


def ops(*args: str) -> str:
    out = StringIO()
    call_command("ops", *args, stdout=out)
    return out.getvalue()


def test_tasks_lists_with_filters(db):
    alice = UserFactory(username="alice")
    TaskFactory(owner=alice, name="backup", kind="handler")
    TaskFactory(name="report", status="paused")
    out = ops("tasks")
    assert out.splitlines()[0].split()[:3] == ["ID", "NAME", "OWNER"]
    assert "backup" in out and "report" in out
    assert "report" not in ops("tasks", "--owner", "alice")
    only_paused = ops("tasks", "--status", "paused")
    assert "report" in only_paused and "backup" not in only_paused
    assert "backup" in ops("tasks", "--name", "back", "--kind", "handler")


def test_runs_of_a_task_and_by_status(db):
    task = TaskFactory()
    failed = RunFactory(task=task, status="failed", finished_at=timezone.now(), error="boom")
    other = RunFactory()
    out = ops("runs", "--task", str(task.pk))
    assert str(failed.pk) in out and str(other.pk) not in out and "boom" in out
    assert str(failed.pk) in ops("runs", "--status", "failed")
    assert str(failed.pk) not in ops("runs", "--status", "scheduled")


def test_show_task_and_run(db):
    task = TaskFactory(name="nightly")
    run = RunFactory(task=task, status="succeeded", finished_at=timezone.now(), output="all good")
    run.attempts.create(number=1, finished_at=timezone.now(), outcome="succeeded")
    shown = ops("showtask", str(task.pk))
    assert "nightly" in shown and str(run.pk) in shown
    shown = ops("showrun", str(run.pk))
    assert "all good" in shown and "succeeded" in shown and "idempotency key" in shown


def test_pause_resume_cancel_task(db):
    task = TaskFactory(
        schedule={"type": "interval", "every": 3600},
        schedule_type="interval",
        next_unplanned_at=timezone.now() + timedelta(hours=1),
    )
    assert "paused" in ops("pausetask", str(task.pk))
    assert "active" in ops("resumetask", str(task.pk))
    assert "cancelled" in ops("canceltask", str(task.pk))


def test_retry_and_cancel_run(db):
    failed = RunFactory(status="failed", attempt=5, finished_at=timezone.now())
    assert "scheduled" in ops("retryrun", str(failed.pk))
    assert "cancelled" in ops("cancelrun", str(failed.pk))
    assert Run.objects.get(pk=failed.pk).status == "cancelled"


def test_refusals_and_bad_ids_are_command_errors(db):
    done = RunFactory(status="succeeded", finished_at=timezone.now())
    with pytest.raises(CommandError, match="only failed or cancelled"):
        ops("retryrun", str(done.pk))
    with pytest.raises(CommandError, match="not an id"):
        ops("showrun", "nope")
    with pytest.raises(CommandError, match="no task"):
        ops("showtask", "01890000-0000-7000-8000-000000000000")
