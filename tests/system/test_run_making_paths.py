"""Every path that makes a run (or makes one claimable again) gives it what its task asks for
now: its resources, its concurrency key and its rate key, the columns the claim reads on the run
(`Task.requests`), and its executable needs, which the claim reads from the task itself.

One property over every path: a task asks for A, then for B (a PATCH, as a user changes it);
the runs the path makes carry B, and a worker too small for B's resources, or without a sandbox
for an executable, claims none of them. A path added without the copy fails here.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from rest_framework.test import APIClient

from tasks.models import Run, Task
from tasks.transitions import claim
from tasks.transitions.plan import plan_due_tasks
from tasks.transitions.rescue import rescue_stuck_runs
from tests.tasks.support import running_run

pytestmark = pytest.mark.django_db

HANDLER = {"kind": "handler", "payload": {"name": "noop"}}
FIRST = {
    "resources": {"cpu": "100m", "memory": "32Mi"},
    "concurrency": {"key": "db", "limit": 2},
    "rate_limit": {"key": "crm", "limit": 5, "per": 60},
}
THEN = {
    "resources": {"cpu": "250m", "memory": "64Mi"},
    "concurrency": {"key": "warehouse", "limit": 3},
    "rate_limit": {"key": "erp", "limit": 7, "per": 60},
}
HOURLY = {"type": "interval", "every": 3600}


def ago(**delta: float) -> str:
    return (datetime.now(UTC) - timedelta(**delta)).isoformat()


def created(api: APIClient, schedule: dict, asks: dict) -> Task:
    response = api.post("/api/v1/tasks", {**HANDLER, "schedule": schedule, **asks}, format="json")
    assert response.status_code == 201, response.content
    return Task.objects.get(pk=response.json()["id"])


def changed(api: APIClient, task: Task) -> Task:
    response = api.patch(f"/api/v1/tasks/{task.pk}", THEN, format="json")
    assert response.status_code == 200, response.content
    task.refresh_from_db()
    return task


def new_runs(task: Task, before: set) -> list[Run]:
    return list(Run.objects.filter(task=task).exclude(pk__in=before).order_by("scheduled_at"))


# Each path: (api) -> (task, runs it made or made claimable again).
def planning(api: APIClient) -> tuple[Task, list[Run]]:
    start = datetime.now(UTC) + timedelta(hours=1)
    task = changed(api, created(api, {**HOURLY, "start_at": start.isoformat()}, FIRST))
    assert not Run.objects.filter(task=task).exists()
    plan_due_tasks(now=start)
    return task, new_runs(task, set())


def create_plans(api: APIClient) -> tuple[Task, list[Run]]:
    task = created(api, {"type": "once", "run_at": ago(seconds=1)}, THEN)
    return task, new_runs(task, set())


def run_now(api: APIClient) -> tuple[Task, list[Run]]:
    task = changed(api, created(api, {"type": "once", "run_at": ago(seconds=1)}, FIRST))
    before = set(Run.objects.filter(task=task).values_list("pk", flat=True))
    response = api.post(f"/api/v1/tasks/{task.pk}/run-now", {}, format="json")
    assert response.status_code == 201, response.content
    return task, new_runs(task, before)


def backfill(api: APIClient) -> tuple[Task, list[Run]]:
    task = changed(api, created(api, {"type": "daily", "at": "03:00"}, FIRST))
    before = set(Run.objects.filter(task=task).values_list("pk", flat=True))
    body = {"start": ago(days=4), "end": ago(days=1)}
    response = api.post(f"/api/v1/tasks/{task.pk}/backfill", body, format="json")
    assert response.status_code == 201, response.content
    return task, new_runs(task, before)


def retry(api: APIClient) -> tuple[Task, list[Run]]:
    task = created(api, {"type": "once", "run_at": ago(seconds=1)}, FIRST)
    run = Run.objects.get(task=task)
    Run.objects.filter(pk=run.pk).update(status="failed", attempt=1, finished_at=datetime.now(UTC))
    task = changed(api, task)
    response = api.post(f"/api/v1/runs/{run.pk}/retry", {}, format="json")
    assert response.status_code == 200, response.content
    return task, [Run.objects.get(pk=run.pk)]


def rescue(api: APIClient) -> tuple[Task, list[Run]]:
    task = created(api, {"type": "daily", "at": "03:00"}, FIRST)
    stale = datetime.now(UTC) - timedelta(hours=1)
    run = running_run(task, scheduled_at=stale, heartbeat_at=stale, max_attempts=3, **task.requests)
    task = changed(api, task)
    assert rescue_stuck_runs(after_seconds=60).rescued == 1
    return task, [Run.objects.get(pk=run.pk)]


def batch(api: APIClient) -> tuple[Task, list[Run]]:
    body = {**HANDLER, "schedule": {"type": "once", "run_at": ago(seconds=1)}, **THEN}
    response = api.post("/api/v1/tasks/batch", {"tasks": [body]}, format="json")
    assert response.status_code == 201, response.content
    task = Task.objects.get(pk=response.json()["ids"][0])
    return task, new_runs(task, set())


def taskset(api: APIClient) -> tuple[Task, list[Run]]:
    entry = {"key": "a", **HANDLER, "schedule": {"type": "once", "run_at": ago(seconds=1)}}
    response = api.put("/api/v1/tasksets/nightly", {"tasks": [{**entry, **THEN}]}, format="json")
    assert response.status_code == 200, response.content
    task = Task.objects.get(pk=response.json()["create"][0]["id"])
    return task, new_runs(task, set())


PATHS: list = [
    planning,
    create_plans,
    run_now,
    backfill,
    retry,
    rescue,
    batch,
    taskset,
]


@pytest.mark.parametrize("path", PATHS)
def test_every_run_a_path_makes_carries_what_its_task_asks_for_now(
    api: APIClient, path: Callable[[APIClient], tuple[Task, list[Run]]]
) -> None:
    task, runs = path(api)
    assert runs
    assert task.cpu_millis == 250 and task.concurrency_key_id and task.rate_key_id
    for run in runs:
        assert {name: getattr(run, name) for name in task.requests} == task.requests
        assert run.status in ("scheduled", "waiting_for_resource")
    # Due now (a planned occurrence may lie ahead), for the claims below.
    Run.objects.filter(pk__in=[run.pk for run in runs]).update(execute_at=datetime.now(UTC))
    # What the columns mean to a claim: a worker offering less than the task asks takes none;
    # nor does a worker without a sandbox once the task is an executable (read from the task).
    small = claim.Capacity(cpu_total=200, cpu_free=200)
    assert not _claimed(small)
    Task.objects.filter(pk=task.pk).update(kind="executable", executable="job.sh")
    assert not _claimed(claim.Capacity(executables=False))
    Task.objects.filter(pk=task.pk).update(kind="handler", executable=None)
    mine = {run.pk for run in runs}
    assert {run.id for run in _claimed(claim.NO_LIMIT)} & mine


def _claimed(capacity: claim.Capacity) -> list[claim.ClaimedRun]:
    taken = list(
        claim.claim_runs(worker="w", limit=32, prefetch_seconds=0, owner_cap=0, capacity=capacity)
    )
    # Back to the queue, so the next claim judges the same runs.
    if taken:
        Run.objects.filter(pk__in=[run.id for run in taken]).update(
            status="scheduled", worker="", started_at=None, heartbeat_at=None
        )
    return taken


def test_a_retry_waits_while_the_key_its_task_names_now_is_full(api: APIClient) -> None:
    """The run failed before its task named a key; retried, it takes the key and its state."""
    task = created(api, {"type": "once", "run_at": ago(seconds=1)}, {})
    failed = Run.objects.get(task=task)
    Run.objects.filter(pk=failed.pk).update(
        status="failed", attempt=1, finished_at=datetime.now(UTC)
    )
    body = {"concurrency": {"key": "db", "limit": 1}}
    assert api.patch(f"/api/v1/tasks/{task.pk}", body, format="json").status_code == 200
    task.refresh_from_db()
    other = created(api, {"type": "once", "run_at": ago(seconds=1)}, body)
    assert [run.id for run in _claimed(claim.NO_LIMIT)] == [Run.objects.get(task=other).pk]
    Run.objects.filter(task=other).update(
        status="running", worker="w", started_at=datetime.now(UTC), heartbeat_at=datetime.now(UTC)
    )
    assert api.post(f"/api/v1/runs/{failed.pk}/retry", {}, format="json").status_code == 200
    assert list(claim.claim_runs(worker="w", limit=8, prefetch_seconds=0, owner_cap=0)) == []
    # Skipped by the claim's scan (a full key); the reviewer gives it its reason.
    assert Run.objects.get(pk=failed.pk).status == "scheduled"
    Run.objects.filter(task=other).update(status="succeeded", finished_at=datetime.now(UTC))
    assert [run.id for run in _claimed(claim.NO_LIMIT)] == [failed.pk]
