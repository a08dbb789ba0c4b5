"""Reliability with real `runworker` processes: cancel kills the payload, SIGTERM releases runs."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from tasks.models import Attempt, Run
from tests.conftest import process_env, wait_for
from tests.factories import RunFactory, TaskFactory
from tests.tasks.support import alive_with

pytestmark = pytest.mark.processes


def test_cancel_kills_a_running_executable_and_records_cancelled(processes, api: APIClient) -> None:
    # A unique, very long `sleep` argument: the payload's processes are found by it in /proc.
    marker = f"31337.{uuid.uuid4().int % 10**9}"
    script = f"#!/bin/sh\necho started $$\nsleep {marker}\n".encode()
    response = api.post(
        "/api/v1/tasks",
        {
            "kind": "executable",
            "name": "sleeper",
            "payload": json.dumps({"args": []}),
            "file": SimpleUploadedFile("sleeper.sh", script),
        },
        format="multipart",
    )
    assert response.status_code == 201, response.content
    run = Run.objects.get(task_id=response.json()["id"])
    # bubblewrap when installed (CI installs it), else rlimit mode, so a fresh machine passes.
    env = process_env(SCHEDULER_SANDBOX_ALLOW_RLIMIT_ONLY="true")
    worker = processes.start("runworker", "--concurrency", "1", env=env)

    pids = wait_for(lambda: alive_with(marker), timeout=30, details=processes.logs)
    assert Run.objects.get(pk=run.pk).status == "running"

    cancelled_at = time.monotonic()
    response = api.post(f"/api/v1/runs/{run.id}/cancel")
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "cancelled"

    # A killed process drops its command line before its parent reaps it, so wait for the
    # pids themselves to be gone: the whole tree is reaped, not left as zombies.
    wait_for(
        lambda: not any(Path(f"/proc/{pid}").exists() for pid in pids),
        timeout=5,
        details=processes.logs,
    )
    assert time.monotonic() - cancelled_at < 5
    assert not alive_with(marker)
    time.sleep(0.5)  # the worker's late result must be dropped by the fence
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert list(Attempt.objects.filter(run=run).values_list("number", "outcome")) == [
        (1, "cancelled")
    ]
    assert worker.poll() is None, "the worker carries on after a cancel"
    assert "run started" in processes.logs()


def sigterm_a_worker_running_a_long_handler(processes) -> tuple[Run, int, float]:
    """A worker with a 1 s grace period holds a 10 s `sleep` run; SIGTERM it.

    Returns the run, the exit code and how long the process took to exit.
    """
    task = TaskFactory(payload={"name": "sleep", "args": {"seconds": 10}}, max_attempts=3)
    run = RunFactory(task=task)
    env = process_env(TASKS_SHUTDOWN_GRACE_SECONDS="1")
    worker = processes.start("runworker", "--concurrency", "1", env=env)
    wait_for(
        lambda: Run.objects.filter(pk=run.pk, status="running").exists(),
        timeout=30,
        details=processes.logs,
    )
    time.sleep(0.5)  # the payload is under way
    stopped_at = time.monotonic()
    worker.terminate()
    code = worker.wait(timeout=15)
    return run, code, time.monotonic() - stopped_at


def test_sigterm_releases_a_payload_that_outlives_the_grace_period(processes) -> None:
    run, code, _took = sigterm_a_worker_running_a_long_handler(processes)

    assert code == 0, processes.logs()
    run.refresh_from_db()
    assert (run.status, run.worker, run.heartbeat_at) == ("scheduled", "", None)
    assert list(Attempt.objects.filter(run=run).values_list("number", "outcome")) == [
        (1, "released")
    ]
    assert not Run.objects.filter(status="running").exists()
    assert "outcome=released" in processes.logs()


def test_sigterm_exits_within_the_grace_period_plus_a_little(processes) -> None:
    _run, code, took = sigterm_a_worker_running_a_long_handler(processes)

    assert code == 0, processes.logs()
    assert took < 5, f"the worker took {took:.1f}s to stop with a 1 s grace period"
