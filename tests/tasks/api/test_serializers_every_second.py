"""The every-second guard for every schedule type that can fire every second: an rrule and an
interval need `allow_every_second` as a cron expression does (a FREQ=SECONDLY rule made 38 runs
in 10 s without it)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tasks.models import Task

pytestmark = pytest.mark.django_db
NOOP = {"kind": "handler", "payload": {"name": "noop"}}

EVERY_SECOND = [
    ({"type": "rrule", "rule": "FREQ=SECONDLY"}, "rule"),
    ({"type": "rrule", "rule": "FREQ=SECONDLY;INTERVAL=1;BYHOUR=9"}, "rule"),
    ({"type": "rrule", "rule": "FREQ=MINUTELY;BYSECOND=" + ",".join(map(str, range(60)))}, "rule"),
    ({"type": "interval", "every": 1}, "every"),
]


@pytest.mark.parametrize(("schedule", "field"), EVERY_SECOND)
def test_a_schedule_firing_every_second_is_refused_naming_its_field(
    api: APIClient, schedule: dict, field: str
) -> None:
    created = api.post("/api/v1/tasks", {**NOOP, "schedule": schedule}, format="json")
    previewed = api.post("/api/v1/schedules/preview", {"schedule": schedule}, format="json")

    for response in (created, previewed):
        assert response.status_code == 400, response.content
        assert "allow_every_second" in response.json()["schedule"][field][0]
    assert not Task.objects.exists()


@pytest.mark.parametrize(("schedule", "field"), EVERY_SECOND)
def test_opting_in_is_accepted_and_round_trips(api: APIClient, schedule: dict, field: str) -> None:
    created = api.post(
        "/api/v1/tasks",
        {**NOOP, "schedule": {**schedule, "allow_every_second": True}},
        format="json",
    )

    assert created.status_code == 201, created.content
    task = created.json()
    assert task["schedule"]["allow_every_second"] is True
    again = api.put(
        f"/api/v1/tasks/{task['id']}", {**NOOP, "schedule": task["schedule"]}, format="json"
    )
    assert again.status_code == 200, again.content


@pytest.mark.parametrize(
    "schedule",
    [
        {"type": "rrule", "rule": "FREQ=SECONDLY;INTERVAL=2"},
        {"type": "rrule", "rule": "FREQ=SECONDLY;BYSECOND=0,30"},
        {"type": "rrule", "rule": "FREQ=MINUTELY"},
        {"type": "interval", "every": 2},
    ],
)
def test_schedules_not_firing_every_second_need_no_opt_in(api: APIClient, schedule: dict) -> None:
    response = api.post("/api/v1/tasks", {**NOOP, "schedule": schedule}, format="json")

    assert response.status_code == 201, response.content
    assert "allow_every_second" not in response.json()["schedule"]


def test_the_opt_in_is_a_boolean_for_every_type(api: APIClient) -> None:
    schedule = {"type": "interval", "every": 10, "allow_every_second": "yes"}

    response = api.post("/api/v1/tasks", {**NOOP, "schedule": schedule}, format="json")

    assert response.status_code == 400
    assert response.json()["schedule"]["allow_every_second"] == ["Must be true or false."]


def test_a_schedule_that_cannot_fire_every_second_does_not_take_the_opt_in(
    api: APIClient,
) -> None:
    schedule = {"type": "daily", "at": "03:00", "allow_every_second": True}

    response = api.post("/api/v1/tasks", {**NOOP, "schedule": schedule}, format="json")

    assert response.status_code == 400
    assert "allow_every_second" in response.json()["schedule"]
