"""End to end with real processes: gunicorn, runscheduler, runworker on the test database."""

from __future__ import annotations

import sys
from collections import Counter
from datetime import timedelta

import pytest
import requests
from django.db import connection
from django.utils import timezone

from tasks.models import Attempt, Process, Run
from tests.conftest import ROOT, free_port, process_env, wait_for, wait_for_api
from tests.factories import RunFactory, TaskFactory, UserFactory

pytestmark = pytest.mark.processes


def test_task_created_over_http_succeeds_on_a_worker(processes, tmp_path):
    UserFactory(username="e2e")
    port = free_port()
    env = process_env(ALLOWED_HOSTS="127.0.0.1")
    api = processes.start("runserver", "--noreload", "--nothreading", f"127.0.0.1:{port}", env=env)
    del api
    processes.start("runscheduler", env=env)
    processes.start("runworker", "--concurrency", "2", env=env)
    base = wait_for_api(f"http://127.0.0.1:{port}", details=processes.logs)
    token = requests.post(
        f"{base}/api/v1/auth/token", json={"username": "e2e", "password": "password-123"}, timeout=5
    ).json()["access"]
    headers = {"Authorization": f"Bearer {token}"}
    created = requests.post(
        f"{base}/api/v1/tasks",
        json={
            "kind": "handler",
            "payload": {"name": "echo", "args": {"hello": "world"}},
            "schedule": {"type": "once", "delay": 2},
        },
        headers=headers,
        timeout=5,
    )
    assert created.status_code == 201, created.text
    task_id = created.json()["id"]

    def finished() -> dict | None:
        task = requests.get(f"{base}/api/v1/tasks/{task_id}", headers=headers, timeout=5).json()
        return task if task["runs"] and task["runs"][0]["status"] == "succeeded" else None

    task = wait_for(finished, timeout=60, interval=0.3, details=processes.logs)
    assert task["status"] == "completed"
    run = requests.get(f"{base}/api/v1/runs/{task['runs'][0]['id']}", headers=headers, timeout=5)
    body = run.json()
    assert body["output"] == '{"hello": "world"}'
    assert [a["outcome"] for a in body["attempts"]] == ["succeeded"]
    # Started on time: not before its scheduled time (database clock) and well within the SLA.
    run_row = Run.objects.get(pk=body["id"])
    assert run_row.started_at >= run_row.scheduled_at
    assert run_row.started_at - run_row.scheduled_at < timedelta(seconds=2)


@pytest.mark.concurrency
def test_three_workers_claim_and_finish_each_of_1000_runs_exactly_once(processes, tmp_path):
    record_dir = tmp_path / "records"
    record_dir.mkdir()
    env = process_env(SCHEDULER_HANDLER_MODULES="tests.handlers", TEST_RECORD_DIR=str(record_dir))
    task = TaskFactory(payload={"name": "record", "args": {}})
    for _ in range(3):
        processes.start("runworker", "--concurrency", "4", env=env)
    # Runs appear once all three are up and listening, so they compete for every claim.
    wait_for(lambda: Process.objects.filter(role="worker").count() == 3, timeout=60)
    now = timezone.now()
    Run.objects.bulk_create(
        RunFactory.build(task=task, owner=task.owner, scheduled_at=now - timedelta(microseconds=i))
        for i in range(1000)
    )
    with connection.cursor() as cursor:
        cursor.execute("NOTIFY scheduler_run_due")

    def all_done() -> bool:
        return Run.objects.filter(status="succeeded").count() == 1000

    wait_for(all_done, timeout=120, interval=0.5)
    lines = [line for f in record_dir.iterdir() for line in f.read_text().splitlines()]
    keys = Counter(line.split()[0] for line in lines)
    assert len(lines) == 1000, "every run executed exactly once"
    assert len(keys) == 1000 and max(keys.values()) == 1
    assert Attempt.objects.count() == 1000
    assert set(Attempt.objects.values_list("number", flat=True)) == {1}
    assert set(Run.objects.values_list("attempt", flat=True)) == {1}
    workers = Counter(Run.objects.values_list("worker", flat=True))
    assert len(workers) >= 2, f"the workers shared the runs: {workers}"


def test_worker_sigterm_finishes_running_payload_and_leaves_nothing_running(processes):
    task = TaskFactory(payload={"name": "sleep", "args": {"seconds": 1.5}})
    RunFactory(task=task)
    worker = processes.start("runworker", "--concurrency", "1")
    wait_for(lambda: Run.objects.filter(status="running").exists(), timeout=30)
    worker.terminate()
    assert worker.wait(timeout=30) == 0
    run = Run.objects.get()
    assert run.status == "succeeded"
    assert not Run.objects.filter(status="running").exists()


def test_commands_accept_once(processes):
    task = TaskFactory(payload={"name": "noop", "args": {}})
    RunFactory(task=task)
    for args in (["runscheduler", "--once"], ["runreviewer", "--once"], ["runworker", "--once"]):
        proc = processes.start(*args)
        assert proc.wait(timeout=60) == 0, processes.logs()
    assert Run.objects.get().status == "succeeded"
    assert sys.executable
    assert ROOT.exists()
