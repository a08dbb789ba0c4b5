"""Overlap policies with real processes, and tasks that end (max_runs, end_at).

Overlap is decided when a worker claims the new occurrence, which is up to the prefetch window
(TASKS_PREFETCH_SECONDS) before it is due.
"""

from __future__ import annotations

import glob
import time
import uuid
from datetime import timedelta
from itertools import pairwise
from pathlib import Path

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from tasks import schedules
from tasks.db import db_now
from tasks.models import Attempt, Process, Run, Task
from tasks.transitions import creation, lifecycle
from tests.conftest import process_env, wait_for
from tests.factories import UserFactory
from tests.tasks.recurring_support import iso

pytestmark = pytest.mark.processes

PREFETCH = timedelta(seconds=0.6)  # the worker's prefetch window, with some slack


def create(raw: dict, **fields: object) -> Task:
    now = db_now()
    data = {"kind": "handler", "schedule": schedules.normalize(raw, now=now), **fields}
    task, _ = creation.create_task(owner=UserFactory(), data=data, now=now)
    return task


def start_fleet(processes, **env: str) -> None:
    """A scheduler and a worker, up and idle before the test creates its task."""
    environment = process_env(**env)
    processes.start("runscheduler", env=environment)
    processes.start("runworker", "--concurrency", "4", env=environment)
    wait_for(lambda: Process.objects.filter(stopped_at=None).count() == 2, timeout=60)


def finished(task: Task, status: str, count: int) -> bool:
    return Run.objects.filter(task=task, status=status).count() >= count


def test_overlap_skip_records_the_new_occurrence_skipped(processes):
    start_fleet(processes)
    sleep = {"name": "sleep", "args": {"seconds": 3}}
    task = create({"type": "interval", "every": 2, "overlap": "skip"}, payload=sleep)

    wait_for(lambda: finished(task, "succeeded", 3) and finished(task, "skipped", 2), timeout=40)

    runs = list(Run.objects.filter(task=task, finished_at__isnull=False).order_by("scheduled_at"))
    ran = [r for r in runs if r.status == "succeeded"]
    skipped = [r for r in runs if r.status == "skipped"]
    for earlier, later in pairwise(ran):
        assert earlier.finished_at <= later.started_at, "runs of the task never overlap"
    for run in skipped:
        assert "overlap" in run.error
        assert run.attempt == 0 and not Attempt.objects.filter(run=run).exists()
        # It was due (give or take the prefetch) while an earlier run was still running.
        assert any(r.started_at < run.scheduled_at < r.finished_at + PREFETCH for r in ran), (
            run.scheduled_at
        )


def test_overlap_cancel_previous_stops_the_running_one(processes):
    start_fleet(processes)
    sleep = {"name": "sleep", "args": {"seconds": 5}}
    task = create({"type": "interval", "every": 2, "overlap": "cancel_previous"}, payload=sleep)

    wait_for(lambda: finished(task, "cancelled", 3), timeout=40)

    cancelled = list(Run.objects.filter(task=task, status="cancelled").order_by("scheduled_at"))
    for run in cancelled:
        assert "cancel_previous" in run.error
        attempt = Attempt.objects.get(run=run)
        assert attempt.outcome == "cancelled"
        # Stopped when the next occurrence was claimed, before its 5 s payload could end.
        following = Run.objects.get(task=task, scheduled_at=run.scheduled_at + timedelta(seconds=2))
        assert run.finished_at <= following.scheduled_at + PREFETCH
        assert run.finished_at - run.started_at < timedelta(seconds=3)
    time.sleep(5)  # the in-process sleeps end: their late results are dropped, not recorded
    assert not Run.objects.filter(task=task, status="succeeded").exists()
    assert Run.objects.filter(pk__in=[r.pk for r in cancelled], status="cancelled").count() == len(
        cancelled
    )


def alive_with(marker: str) -> int:
    count = 0
    for cmdline in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            raw = Path(cmdline).read_bytes()
        except OSError:
            continue
        # The payload's own `sleep`, not the shell or sandbox wrapper that started it.
        if raw.startswith(b"sleep\x00") and marker.encode() in raw:
            count += 1
    return count


def test_overlap_cancel_previous_kills_the_payload_process(processes, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    # bubblewrap when installed (CI installs it), else rlimit mode, so a fresh machine passes.
    start_fleet(
        processes, MEDIA_ROOT=str(settings.MEDIA_ROOT), SCHEDULER_SANDBOX_ALLOW_RLIMIT_ONLY="true"
    )
    marker = f"31337.{uuid.uuid4().int % 10**9}"
    name = default_storage.save("executables/slow.sh", ContentFile(f"#!/bin/sh\nsleep {marker}\n"))
    task = create(
        {"type": "interval", "every": 2, "overlap": "cancel_previous"},
        payload={"args": []},
        kind="executable",
    )
    Task.objects.filter(pk=task.pk).update(executable=name)

    peak = 0
    deadline = time.monotonic() + 40
    while not finished(task, "cancelled", 3):
        assert time.monotonic() < deadline, processes.logs()
        peak = max(peak, alive_with(marker))
        time.sleep(0.1)

    assert peak == 1, "each cancelled payload was killed before the next one started"
    lifecycle.cancel_task(task=task, force=True, now=db_now())
    wait_for(lambda: alive_with(marker) == 0, timeout=10)


def test_overlap_allow_runs_both(processes):
    start_fleet(processes)
    sleep = {"name": "sleep", "args": {"seconds": 2.5}}
    task = create({"type": "interval", "every": 1, "allow_every_second": True}, payload=sleep)

    wait_for(lambda: finished(task, "succeeded", 4), timeout=40)

    ran = list(Run.objects.filter(task=task, status="succeeded").order_by("scheduled_at"))
    assert any(later.started_at < earlier.finished_at for earlier, later in pairwise(ran))
    assert not Run.objects.filter(task=task, status__in=["skipped", "cancelled"]).exists()


def test_max_runs_and_end_at_complete_the_task(processes):
    start_fleet(processes)
    noop = {"name": "noop", "args": {}}
    by_count = create(
        {"type": "interval", "every": 1, "allow_every_second": True, "max_runs": 3}, payload=noop
    )
    start = db_now() + timedelta(seconds=1)
    window = {"start_at": iso(start), "end_at": iso(start + timedelta(seconds=2.5))}
    by_end = create(
        {"type": "interval", "every": 1, "allow_every_second": True, **window}, payload=noop
    )

    for task in (by_count, by_end):
        wait_for(lambda t=task: Task.objects.get(pk=t.pk).status == "completed", timeout=30)
        runs = Run.objects.filter(task=task)
        assert list(runs.values_list("status", flat=True)) == ["succeeded"] * 3
        task.refresh_from_db()
        assert task.next_unplanned_at is None
    time.sleep(2)
    assert Run.objects.filter(task=by_count).count() == 3, "nothing after max_runs"
