"""Worker capacity with real processes: a worker offering 2 CPUs runs 2-CPU tasks one at a time in
strict priority order, the waiting ones show why through the API, and a task no worker can
hold waits with its reason without blocking a small one."""

from __future__ import annotations

import itertools
import time

import pytest
import requests
from django.db import connection

from tasks.models import Run
from tests.conftest import free_port, process_env, wait_for, wait_for_api
from tests.factories import RunFactory, TaskFactory, UserFactory

pytestmark = pytest.mark.processes

SLEEP = 1.5  # each 2-CPU run's length


def commits() -> int:
    """Transactions committed in the test database so far (a spinning worker commits
    hundreds a second: one claim each)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        )
        return int(cursor.fetchone()[0])


def test_capacity_runs_in_strict_priority_and_says_why_runs_wait(processes):
    UserFactory(username="cap")
    port = free_port()
    env = process_env(ALLOWED_HOSTS="127.0.0.1")
    processes.start("runserver", "--noreload", "--nothreading", f"127.0.0.1:{port}", env=env)
    processes.start("runreviewer", env=env)
    base = wait_for_api(f"http://127.0.0.1:{port}", details=processes.logs)
    token = requests.post(
        f"{base}/api/v1/auth/token", json={"username": "cap", "password": "password-123"}, timeout=5
    )
    headers = {"Authorization": f"Bearer {token.json()['access']}"}

    def create(priority: int, resources: dict, seconds: float = SLEEP) -> str:
        body = {
            "kind": "handler",
            "payload": {"name": "sleep", "args": {"seconds": seconds}},
            "schedule": {"type": "once"},
            "priority": priority,
            "resources": resources,
        }
        answer = requests.post(f"{base}/api/v1/tasks", json=body, headers=headers, timeout=5)
        assert answer.status_code == 201, answer.text
        return answer.json()["runs"][0]["id"]

    def shown(run_id: str) -> dict:
        return requests.get(f"{base}/api/v1/runs/{run_id}", headers=headers, timeout=5).json()

    # All due before the worker starts, so its first claim sees them all.
    by_priority = {p: create(p, {"cpu": "2"}) for p in (1, 5, 9)}
    huge = create(9, {"cpu": "64"})
    small = create(0, {"cpu": "100m"}, seconds=0)
    processes.start("runworker", "--cpu", "2", "--concurrency", "4", env=env)

    # While one 2-CPU run holds both CPUs, the others show why they wait.
    seen: dict[str, set[tuple[str, str]]] = {run_id: set() for run_id in by_priority.values()}

    def all_finished() -> bool:
        for run_id in seen:
            body = shown(run_id)
            seen[run_id].add((body["status"], body["wait_reason"]))
        return all(("succeeded", "") in states for states in seen.values())

    wait_for(
        lambda: shown(by_priority[9])["status"] == "running", timeout=30, details=processes.logs
    )
    commits_before, clock_before = commits(), time.monotonic()
    wait_for(all_finished, timeout=30, interval=0.1, details=processes.logs)
    time.sleep(1.0)  # statistics reach pg_stat_database within a second
    rate = (commits() - commits_before) / (time.monotonic() - clock_before)

    runs = {p: Run.objects.get(pk=run_id) for p, run_id in by_priority.items()}
    order = sorted(runs, key=lambda p: runs[p].started_at)
    assert order == [9, 5, 1], order
    for earlier, later in itertools.pairwise(order):
        assert runs[earlier].finished_at <= runs[later].started_at, "two 2-CPU runs overlapped"
    waiting = ("waiting_for_resource", "waiting for free capacity (cpu=2) on a worker")
    assert waiting in seen[by_priority[5]] and waiting in seen[by_priority[1]], seen
    assert all(run.wait_reason == "" for run in runs.values())
    # Waiting on capacity is waiting on the wake event, not a spin on the due runs.
    assert rate < 200, f"{rate:.0f} commits a second while runs waited: a busy loop"

    # The 64-CPU run fits no live worker: it waits with its reason and blocked no one.
    wait_for(lambda: shown(small)["status"] == "succeeded", timeout=20, details=processes.logs)
    body = shown(huge)
    assert (body["status"], body["wait_reason"]) == (
        "waiting_for_resource",
        "no live worker offers cpu=64",
    )


def test_a_capped_owner_with_a_run_due_does_not_make_the_worker_spin(processes):
    """TASKS_OWNER_MAX_RUNNING = 1: the owner's second due run waits for the first to end, and
    the worker waits too instead of claiming again at once (it claimed ~1,000 times a second)."""
    owner = UserFactory(username="capped")
    env = process_env(TASKS_OWNER_MAX_RUNNING="1")
    runs = []
    for _ in range(2):
        task = TaskFactory(owner=owner, payload={"name": "sleep", "args": {"seconds": 2.0}})
        runs.append(RunFactory(task=task).pk)
    processes.start("runworker", "--concurrency", "4", env=env)
    wait_for(
        lambda: Run.objects.filter(pk__in=runs, status="running").exists(),
        timeout=30,
        details=processes.logs,
    )
    commits_before, clock_before = commits(), time.monotonic()
    wait_for(
        lambda: Run.objects.filter(pk__in=runs, status="succeeded").count() == 2,
        timeout=30,
        interval=0.1,
        details=processes.logs,
    )
    time.sleep(1.0)  # statistics reach pg_stat_database within a second
    rate = (commits() - commits_before) / (time.monotonic() - clock_before)
    first, second = sorted(Run.objects.filter(pk__in=runs), key=lambda r: r.started_at)
    assert first.finished_at <= second.started_at, "the per-owner cap let both run at once"
    assert rate < 200, f"{rate:.0f} commits a second while a capped run waited: a busy loop"
