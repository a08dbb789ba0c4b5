"""A cron expression that fires every second needs the schedule to say so: six fields typed for
five (`* * * * * *`) would otherwise make a task that fires 86,400 times a day."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from rest_framework.test import APIClient

from tasks.models import Task

pytestmark = pytest.mark.django_db
NOOP = {"kind": "handler", "payload": {"name": "noop"}}


@pytest.mark.parametrize("expression", ["* * * * * *", "*/1 * * * * *", "0-59 30 9 * * *"])
def test_every_second_is_refused_naming_the_expression(api: APIClient, expression: str) -> None:
    schedule = {"type": "cron", "expression": expression}

    created = api.post("/api/v1/tasks", {**NOOP, "schedule": schedule}, format="json")
    previewed = api.post("/api/v1/schedules/preview", {"schedule": schedule}, format="json")
    seed = api.post("/task", {**NOOP, "schedule": expression}, format="json")

    for response in (created, previewed, seed):
        assert response.status_code == 400, response.content
        assert "allow_every_second" in response.json()["schedule"]["expression"][0]
    assert not Task.objects.exists()


def test_opting_in_fires_every_second_and_round_trips(api: APIClient) -> None:
    schedule = {"type": "cron", "expression": "* * * * * *", "allow_every_second": True}

    created = api.post("/api/v1/tasks", {**NOOP, "schedule": schedule}, format="json")

    assert created.status_code == 201, created.content
    task = created.json()
    assert task["schedule"]["allow_every_second"] is True
    first, second = (datetime.fromisoformat(at) for at in task["next_runs"][:2])
    assert second - first == timedelta(seconds=1)
    # What GET shows can be sent back as it is.
    again = api.put(
        f"/api/v1/tasks/{task['id']}", {**NOOP, "schedule": task["schedule"]}, format="json"
    )
    assert again.status_code == 200, again.content


@pytest.mark.parametrize("expression", ["*/20 * * * * *", "* * * * *", "0 * * * * *"])
def test_other_expressions_need_no_opt_in(api: APIClient, expression: str) -> None:
    schedule = {"type": "cron", "expression": expression}

    response = api.post("/api/v1/tasks", {**NOOP, "schedule": schedule}, format="json")

    assert response.status_code == 201, response.content
    assert "allow_every_second" not in response.json()["schedule"]


def test_the_opt_in_is_a_boolean(api: APIClient) -> None:
    schedule = {"type": "cron", "expression": "* * * * * *", "allow_every_second": "yes"}

    response = api.post("/api/v1/tasks", {**NOOP, "schedule": schedule}, format="json")

    assert response.status_code == 400
    assert response.json()["schedule"]["allow_every_second"] == ["Must be true or false."]
