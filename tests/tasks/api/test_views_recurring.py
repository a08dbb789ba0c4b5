"""Recurring tasks through the API: changing, pausing and resuming them, skip-next, run-now,
previews (`next_runs` and POST /schedules/preview) and schedules refused with 400."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise

import pytest
from rest_framework.test import APIClient

from tasks.db import db_now
from tasks.models import Run, Task
from tasks.transitions import creation, plan
from tests.tasks.support import running_run

NOOP = {"kind": "handler", "payload": {"name": "noop"}}
PREVIEW = "/api/v1/schedules/preview"


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text)


def create(api: APIClient, schedule: object) -> dict:
    response = api.post("/api/v1/tasks", {**NOOP, "schedule": schedule}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def planned(task_id: str, status: str = "scheduled") -> list[datetime]:
    runs = Run.objects.filter(task_id=task_id, status=status).order_by("scheduled_at")
    return list(runs.values_list("scheduled_at", flat=True))


# --- changing a schedule, pause, resume, skip-next, run-now ---------------------------------


def test_patch_replans_every_unstarted_occurrence(api: APIClient) -> None:
    task = create(api, {"type": "interval", "every": 10})
    first, *rest = Run.objects.filter(task_id=task["id"]).order_by("scheduled_at")
    Run.objects.filter(pk=first.pk).update(
        status="running",
        attempt=1,
        worker="w-1",
        started_at=first.scheduled_at,
        heartbeat_at=first.scheduled_at,
    )
    assert len(rest) == 2

    response = api.patch(
        f"/api/v1/tasks/{task['id']}", {"schedule": {"type": "interval", "every": 7}}, format="json"
    )

    assert response.status_code == 200
    body = response.json()
    anchor = utc(body["schedule"]["anchor"])
    new = [anchor + timedelta(seconds=7 * k) for k in range(1, 5)]  # 7..28 s: the look-ahead
    assert not Run.objects.filter(pk__in=[r.pk for r in rest]).exists()
    assert planned(task["id"]) == new
    assert Run.objects.get(pk=first.pk).status == "running"  # a started run is left alone
    assert [utc(t) for t in body["next_runs"]] == [*new, anchor + timedelta(seconds=35)]


def test_patch_is_atomic_when_replanning_fails(api: APIClient, monkeypatch) -> None:
    task = create(api, {"type": "interval", "every": 10})
    before = planned(task["id"])

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("planning failed half-way")

    monkeypatch.setattr(creation, "plan_task", broken)
    with pytest.raises(RuntimeError):
        api.patch(
            f"/api/v1/tasks/{task['id']}",
            {"schedule": {"type": "interval", "every": 7}},
            format="json",
        )

    # The withdrawal of the old runs rolled back with the failed re-planning.
    assert planned(task["id"]) == before
    assert Task.objects.get(pk=task["id"]).schedule["every"] == 10


def test_paused_task_gets_no_new_occurrences(api: APIClient) -> None:
    task = create(api, {"type": "interval", "every": 10})

    paused = api.post(f"/api/v1/tasks/{task['id']}/pause").json()
    plan.plan_due_tasks(now=db_now() + timedelta(hours=1))

    assert (paused["status"], paused["next_runs"]) == ("paused", [])
    assert not Run.objects.filter(task_id=task["id"]).exists()


@pytest.mark.parametrize("misfire", ["run_once", "skip", "run_all"])
def test_resume_after_a_long_pause_skips_what_the_pause_covered(
    api: APIClient, settings, misfire: str
) -> None:
    settings.TASKS_MISFIRE_GRACE_SECONDS = 60.0
    task = create(api, {"type": "interval", "every": 30, "misfire": misfire})
    api.post(f"/api/v1/tasks/{task['id']}/pause")
    # Ten minutes pass while paused: the stored times are moved back instead of waiting.
    stored = Task.objects.get(pk=task["id"])
    stored.schedule["anchor"] = (utc(stored.schedule["anchor"]) - timedelta(minutes=10)).isoformat()
    stored.next_unplanned_at -= timedelta(minutes=10)
    stored.paused_at -= timedelta(minutes=10)
    stored.save()

    resumed = api.post(f"/api/v1/tasks/{task['id']}/resume").json()

    now = db_now()
    skipped = planned(task["id"], "skipped")
    # Every 30 s for 10 min, the grace minute too: whatever the misfire policy, none runs.
    assert len(skipped) == 20 and max(skipped) < now
    assert not [at for at in planned(task["id"]) if at < now]
    errors = Run.objects.filter(task_id=task["id"], status="skipped").values_list("error")
    assert {e for (e,) in errors} == {"paused: the task was paused at this occurrence's time"}
    # Resume continues from now: the occurrences after it all run.
    assert planned(task["id"]) and min(planned(task["id"])) > now
    assert resumed["status"] == "active"


def test_skip_next_skips_the_next_occurrence_and_next_runs_moves_on(api: APIClient) -> None:
    task = create(api, {"type": "interval", "every": 10})
    first, second = planned(task["id"])[:2]

    response = api.post(f"/api/v1/tasks/{task['id']}/skip-next")

    assert response.status_code == 200
    run = response.json()
    assert (utc(run["scheduled_at"]), run["status"]) == (first, "skipped")
    body = api.get(f"/api/v1/tasks/{task['id']}").json()
    assert utc(body["next_runs"][0]) == second


def test_run_now_adds_one_run_and_never_shifts_the_cadence(api: APIClient) -> None:
    task = create(api, {"type": "interval", "every": 3600, "max_runs": 2})

    response = api.post(f"/api/v1/tasks/{task['id']}/run-now")

    assert response.status_code == 201
    assert response.json()["status"] == "scheduled"
    body = api.get(f"/api/v1/tasks/{task['id']}").json()
    assert (body["next_run_at"], body["next_runs"]) == (task["next_run_at"], task["next_runs"])
    assert len(body["next_runs"]) == 2  # max_runs still allows both occurrences
    assert Task.objects.get(pk=task["id"]).runs_planned == 0


def test_running_occurrence_survives_pause_and_resume(api: APIClient) -> None:
    task = create(api, {"type": "interval", "every": 10})
    run = running_run(Task.objects.get(pk=task["id"]))

    api.post(f"/api/v1/tasks/{task['id']}/pause")
    api.post(f"/api/v1/tasks/{task['id']}/resume")

    run.refresh_from_db()
    assert run.status == "running"


# --- previews -----------------------------------------------------------------------------

SCHEDULES = [
    {"type": "interval", "every": 5400},
    {"type": "daily", "at": "02:30", "timezone": "Europe/Berlin"},
    {"type": "weekly", "days": ["sun", "wed"], "at": "08:15", "timezone": "America/New_York"},
    {"type": "monthly", "day": 31, "at": "09:00", "timezone": "Australia/Lord_Howe"},
    {"type": "cron", "expression": "*/20 1-3 * * *", "timezone": "Europe/Berlin"},
    {"type": "cron", "expression": "*/15 30 2 * * sun"},
    {"type": "cron", "expression": "@daily", "timezone": "Asia/Kolkata"},
]


@pytest.mark.parametrize("schedule", SCHEDULES, ids=lambda s: s.get("expression", s["type"]))
def test_next_runs_and_preview_agree_from_a_future_start_at(api: APIClient, schedule) -> None:
    schedule = {**schedule, "start_at": "2030-03-29T00:00:00"}
    task = create(api, schedule)

    shown = api.post(PREVIEW, {"schedule": schedule, "count": 5}, format="json").json()

    assert task["next_runs"] == shown["next_runs"]
    assert all(t.endswith("Z") for t in shown["next_runs"])
    assert utc(shown["next_runs"][0]) >= datetime(2030, 3, 28, 11, tzinfo=UTC)  # start_at, local


def test_preview_across_the_berlin_spring_forward(api: APIClient, db) -> None:
    # 31 March 2030, 02:00 CET becomes 03:00 CEST: 02:30 does not exist that night.
    daily = {"type": "daily", "at": "02:30", "timezone": "Europe/Berlin"}
    hourly = {"type": "cron", "expression": "30 * * * *", "timezone": "Europe/Berlin"}
    start = {"start_at": "2030-03-30T00:00:00"}

    days = api.post(PREVIEW, {"schedule": daily | start, "count": 3}, format="json").json()
    hours = api.post(
        PREVIEW,
        {"schedule": hourly | {"start_at": "2030-03-31T00:00:00"}, "count": 3},
        format="json",
    ).json()

    # Fixed time: once, at the first valid instant after the gap (03:00 CEST = 01:00Z).
    assert days["next_runs"] == [
        "2030-03-30T01:30:00Z",
        "2030-03-31T01:00:00Z",
        "2030-04-01T00:30:00Z",
    ]
    # Wildcard hour: absolute time; local 02:30 never happens, so 00:30Z is followed by 01:30Z.
    assert hours["next_runs"] == [
        "2030-03-30T23:30:00Z",
        "2030-03-31T00:30:00Z",
        "2030-03-31T01:30:00Z",
    ]


def test_next_runs_include_occurrences_already_planned(api: APIClient) -> None:
    task = create(api, {"type": "interval", "every": 10})

    first = planned(task["id"])[0]

    assert utc(task["next_runs"][0]) == first
    steps = [utc(b) - utc(a) for a, b in pairwise(task["next_runs"])]
    assert steps == [timedelta(seconds=10)] * 4


# --- invalid schedules: 400 naming the field ------------------------------------------------

BACKWARDS = {"start_at": "2030-02-01T00:00:00Z", "end_at": "2030-01-01T00:00:00Z"}
PAST = {"start_at": "2020-01-01T00:00:00Z", "end_at": "2020-02-01T00:00:00Z"}  # never runs again
INVALID = [
    ({"type": "interval", "every": 60, "timezone": "Europe/Atlantis"}, "timezone"),
    ({"type": "cron", "expression": "60 * * * * *"}, "expression"),  # seconds 0-59
    ({"type": "cron", "expression": "0-60/5 * * * * *"}, "expression"),
    ({"type": "cron", "expression": "*/0 * * * * *"}, "expression"),
    ({"type": "cron", "expression": "0 0 30 2 *"}, "expression"),  # never fires
    ({"type": "cron", "expression": "0 0 31 4,6,9,11 *"}, "expression"),
    ({"type": "daily", "at": "09:00", **BACKWARDS}, "end_at"),
    ({"type": "interval", "every": 60, **PAST}, "end_at"),
    ({"type": "interval", "every": 0}, "every"),
    ({"type": "interval", "every": 60, "jitter": -1}, "jitter"),
    ({"type": "interval", "every": 60, "overlap": "queue"}, "overlap"),
    ({"type": "interval", "every": 60, "misfire_grace": 0}, "misfire_grace"),
    ({"type": "cron", "expression": "* * * * *", "misfire_grace": "soon"}, "misfire_grace"),
]


@pytest.mark.parametrize(("schedule", "field"), INVALID, ids=[f for _, f in INVALID])
def test_invalid_schedule_is_400_naming_the_field(api: APIClient, db, schedule, field) -> None:
    created = api.post("/api/v1/tasks", {**NOOP, "schedule": schedule}, format="json")
    previewed = api.post(PREVIEW, {"schedule": schedule}, format="json")

    for response in (created, previewed):
        assert response.status_code == 400
        errors = response.json()["schedule"]
        assert field in errors, errors
        assert all(isinstance(message, str) and message for message in errors[field])
    assert not Task.objects.exists()


@pytest.mark.parametrize(("schedule", "field"), INVALID[:3], ids=[f for _, f in INVALID[:3]])
def test_invalid_schedule_in_a_patch_is_400_and_changes_nothing(
    api: APIClient, schedule, field
) -> None:
    task = create(api, {"type": "interval", "every": 10})
    before = planned(task["id"])

    response = api.patch(f"/api/v1/tasks/{task['id']}", {"schedule": schedule}, format="json")

    assert response.status_code == 400
    assert field in response.json()["schedule"]
    assert planned(task["id"]) == before
