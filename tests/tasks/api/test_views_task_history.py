"""What a task has done and will do next: `runs` newest first, `last_run`, a task that ended
with a failed run reads `failed`, `next_run_at` is `next_runs[0]`, and GET /api/v1/runs.

Runs are planned by the API (creation plans the look-ahead inline), claimed and finished by
the worker's own statements (tasks/sql/claim.sql), on the real database."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from rest_framework.test import APIClient

from tasks.models import Run, Task
from tasks.transitions.claim import ClaimedRun, Outcome, claim_runs, record_outcomes
from tasks.transitions.rescue import rescue_stuck_runs
from tests.factories import RunFactory, TaskFactory

pytestmark = pytest.mark.django_db


def parse(text: str) -> datetime:
    return datetime.fromisoformat(text)


def claim(*, prefetch: float = 0, limit: int = 10) -> list[ClaimedRun]:
    return claim_runs(worker="w-1", limit=limit, prefetch_seconds=prefetch, owner_cap=100)


def finish(run: ClaimedRun, status: str) -> None:
    """Record the worker's final outcome of `run`: `succeeded`, or `failed` (dead-lettered)."""
    done = Outcome(
        run_id=run.id,
        attempt=run.attempt,
        status=status,
        attempt_outcome=status,
        started_at=run.claimed_at,
        error="" if status == "succeeded" else "boom",
    )
    assert record_outcomes(worker="w-1", outcomes=[done])


def read(api: APIClient, task_id: str) -> dict:
    response = api.get(f"/api/v1/tasks/{task_id}")
    assert response.status_code == 200, response.content
    return response.json()


def ids(page: dict) -> list[str]:
    return [item["id"] for item in page["results"]]


def test_a_one_time_task_whose_run_dead_lettered_reads_failed(api: APIClient, create) -> None:
    doomed = create(name="doomed", max_attempts=1)
    fine = create(name="fine")
    by_task = {run.task_id: run for run in claim()}
    finish(by_task[Task.objects.get(pk=doomed["id"]).pk], "failed")
    finish(by_task[Task.objects.get(pk=fine["id"]).pk], "succeeded")

    task = read(api, doomed["id"])
    run = Run.objects.get(task_id=doomed["id"])
    assert task["status"] == "failed"
    assert task["last_run"] == task["runs"][0]
    assert {key: task["last_run"][key] for key in ("id", "status", "finished_at")} == {
        "id": str(run.pk),
        "status": "failed",
        "finished_at": run.finished_at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
    }
    assert read(api, fine["id"])["status"] == "completed"
    assert read(api, fine["id"])["last_run"]["status"] == "succeeded"
    assert ids(api.get("/api/v1/runs?status=failed").json()) == [str(run.pk)]
    assert ids(api.get("/api/v1/tasks?status=failed").json()) == [doomed["id"]]
    assert ids(api.get("/api/v1/tasks?last_run_status=failed").json()) == [doomed["id"]]
    assert ids(api.get("/api/v1/tasks?last_run_status=succeeded").json()) == [fine["id"]]


def test_a_run_rescued_with_its_attempts_spent_fails_its_task(api: APIClient, create) -> None:
    """The reviewer's dead letter (tasks/sql/complete.sql), not only the worker's."""
    task = create(max_attempts=1)
    (claimed,) = claim()
    Run.objects.filter(pk=claimed.id).update(heartbeat_at=datetime.now(UTC) - timedelta(hours=1))

    assert rescue_stuck_runs(after_seconds=60).failed == 1

    body = read(api, task["id"])
    assert (body["status"], body["last_run"]["status"]) == ("failed", "failed")
    assert ids(api.get("/api/v1/tasks?status=completed").json()) == []


def test_retrying_the_failed_run_makes_the_task_active_again(api: APIClient, create) -> None:
    task = create(max_attempts=1)
    (claimed,) = claim()
    finish(claimed, "failed")

    assert api.post(f"/api/v1/runs/{claimed.id}/retry").status_code == 200
    assert read(api, task["id"])["status"] == "active"


def test_a_task_firing_every_second_shows_the_runs_that_ran_newest_first(
    api: APIClient, create
) -> None:
    task = create(schedule={"type": "interval", "every": 1, "allow_every_second": True})
    ran: list[str] = []
    deadline = time.monotonic() + 3.5
    while time.monotonic() < deadline:
        for run in claim():
            finish(run, "succeeded")
            ran.append(str(run.id))
        time.sleep(0.2)
    assert len(ran) >= 3

    body = read(api, task["id"])

    times = [parse(run["scheduled_at"]) for run in body["runs"]]
    assert times == sorted(times, reverse=True) and len(times) >= 3  # newest first
    assert {run["id"] for run in body["runs"] if run["status"] == "succeeded"} == set(ran)
    begun = [run for run in body["runs"] if run["attempt"] > 0]
    assert body["last_run"]["id"] == begun[0]["id"]
    # The occurrences planned ahead are next_runs, with their runs' ids.
    scheduled = Run.objects.filter(task_id=task["id"], status="scheduled")
    planned = {str(run.pk): run.scheduled_at for run in scheduled}
    detail = body["next_runs_detail"]
    assert [d["scheduled_at"] for d in detail] == body["next_runs"]
    assert detail and all(planned[d["run_id"]] == parse(d["scheduled_at"]) for d in detail)
    assert not {d["run_id"] for d in detail} & {run["id"] for run in body["runs"]}


def test_next_run_at_is_next_runs_first_after_creation_and_after_each_run(
    api: APIClient, create
) -> None:
    task = create(schedule={"type": "interval", "every": 10})
    body = read(api, task["id"])
    assert task["next_run_at"] == task["next_runs"][0] == body["next_run_at"]
    cursor = Task.objects.get(pk=task["id"]).next_unplanned_at
    assert parse(body["next_run_at"]) < cursor  # the planned run, not the planner's cursor

    for _ in range(3):
        (run,) = claim(prefetch=30, limit=1)  # the earliest planned occurrence, early
        finish(run, "succeeded")
        body = read(api, task["id"])
        assert body["next_run_at"] == body["next_runs"][0]
        assert parse(body["next_run_at"]) > run.scheduled_at
        assert body["last_run"]["id"] == str(run.id)


def test_the_list_orders_by_the_next_fire_time(api: APIClient, create) -> None:
    now = datetime.now(UTC)
    in_an_hour = (now + timedelta(hours=1)).isoformat()
    later = create(name="later", schedule={"type": "once", "run_at": in_an_hour})
    soon = create(name="soon", schedule={"type": "once", "delay": 5})  # planned: no cursor left
    paused = create(name="paused", schedule={"type": "interval", "every": 60})
    api.post(f"/api/v1/tasks/{paused['id']}/pause")

    page = api.get("/api/v1/tasks?ordering=next_run_at").json()

    assert ids(page) == [soon["id"], later["id"], paused["id"]]  # no next run: last
    shown = [task["next_run_at"] for task in page["results"]]
    assert shown == [soon["next_run_at"], later["next_run_at"], None]
    descending = api.get("/api/v1/tasks?ordering=-next_run_at").json()
    assert ids(descending)[1:] == [later["id"], soon["id"]]
    # As a later term too: the alias is added whenever the ordering names it.
    by_priority = api.get("/api/v1/tasks", {"ordering": "priority, -next_run_at"}).json()
    assert ids(by_priority) == [paused["id"], later["id"], soon["id"]]  # all of priority 5


def test_run_list_is_the_callers_own_runs_across_tasks(
    api: APIClient, other_api: APIClient, user, other_user
) -> None:
    base = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    first, second = TaskFactory(owner=user), TaskFactory(owner=user)
    mine = [
        RunFactory(task=task, scheduled_at=base + timedelta(minutes=i))
        for i, task in enumerate([first, second, first, second])
    ]
    theirs = RunFactory(task=TaskFactory(owner=other_user), scheduled_at=base)
    at = base + timedelta(hours=1)
    RunFactory(
        task=first, scheduled_at=at, status="succeeded", attempt=1, started_at=at, finished_at=at
    )

    page = api.get("/api/v1/runs", {"status": "scheduled"}).json()
    assert page["count"] == 4
    assert ids(page) == [str(run.pk) for run in reversed(mine)]  # newest first
    assert str(theirs.pk) not in ids(api.get("/api/v1/runs").json())
    assert ids(other_api.get("/api/v1/runs").json()) == [str(theirs.pk)]
    assert ids(api.get("/api/v1/runs", {"task": str(theirs.task_id)}).json()) == []
    by_task = api.get("/api/v1/runs", {"task": str(second.pk), "status": "scheduled"}).json()
    assert ids(by_task) == [str(mine[3].pk), str(mine[1].pk)]
    window = {"scheduled_after": "2026-03-01T12:01:00Z", "scheduled_before": "2026-03-01T12:03:00Z"}
    assert ids(api.get("/api/v1/runs", window).json()) == [str(mine[2].pk), str(mine[1].pk)]
    paged = api.get("/api/v1/runs", {"page_size": 2, "page": 2}).json()
    assert (paged["count"], ids(paged)) == (5, [str(mine[2].pk), str(mine[1].pk)])


@pytest.mark.parametrize(
    "query",
    [{"scheduled_after": "yesterday"}, {"status": "done"}, {"task": "nope"}],
)
def test_a_bad_run_list_filter_is_a_400_naming_it(api: APIClient, query: dict) -> None:
    response = api.get("/api/v1/runs", query)
    assert response.status_code == 400
    assert set(response.json()) == set(query)


def test_a_bad_last_run_status_is_a_400_naming_it(api: APIClient) -> None:
    response = api.get("/api/v1/tasks", {"last_run_status": "done"})
    assert response.status_code == 400
    assert set(response.json()) == {"last_run_status"}


def test_last_run_is_the_last_that_happened_not_a_future_skipped_occurrence(
    api: APIClient, create
) -> None:
    task = create(schedule={"type": "daily", "at": "03:00"})
    ran = RunFactory(
        task=Task.objects.get(pk=task["id"]),
        scheduled_at=datetime.now(UTC) - timedelta(hours=1),
        status="succeeded",
        attempt=1,
        started_at=datetime.now(UTC),
        finished_at=datetime.now(UTC),
    )
    skipped = api.post(f"/api/v1/tasks/{task['id']}/skip-next", {}, format="json")
    assert skipped.status_code == 200, skipped.content
    assert parse(skipped.json()["scheduled_at"]) > datetime.now(UTC)

    assert read(api, task["id"])["last_run"]["id"] == str(ran.pk)
    found = api.get("/api/v1/tasks?last_run_status=succeeded").json()
    assert ids(found) == [task["id"]]
    assert ids(api.get("/api/v1/tasks?last_run_status=skipped").json()) == []
