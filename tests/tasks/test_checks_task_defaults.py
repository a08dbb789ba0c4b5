"""A new task's retry policy comes from TASKS_DEFAULT_* when its request sets none; bad values
stop the process at start-up (system checks tasks.E003, tasks.E004)."""

from __future__ import annotations

import pytest
from django.core import checks
from django.test import override_settings
from rest_framework.test import APIClient

from tasks.models import Run, Task

DEFAULTS = {
    "TASKS_DEFAULT_MAX_ATTEMPTS": 7,
    "TASKS_DEFAULT_BACKOFF_BASE_SECONDS": 3.5,
    "TASKS_DEFAULT_BACKOFF_CAP_SECONDS": 90.0,
}
BODY = {"kind": "handler", "payload": {"name": "noop"}, "schedule": {"type": "once"}}


@override_settings(**DEFAULTS)
def test_a_task_without_a_retry_policy_takes_the_settings(api: APIClient) -> None:
    response = api.post("/api/v1/tasks", BODY, format="json")

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["max_attempts"] == 7
    assert body["retry_backoff"] == {"base": 3.5, "cap": 90.0}
    task = Task.objects.get(pk=body["id"])
    assert (task.max_attempts, task.retry_backoff_base, task.retry_backoff_cap) == (7, 3.5, 90.0)
    assert {run.max_attempts for run in Run.objects.filter(task=task)} == {7}


@override_settings(**DEFAULTS)
def test_a_request_policy_wins_over_the_settings(api: APIClient) -> None:
    body = {**BODY, "max_attempts": 2, "retry_backoff": {"base": 1.0, "cap": 4.0}}
    response = api.post("/api/v1/tasks", body, format="json")

    assert response.status_code == 201, response.content
    assert response.json()["max_attempts"] == 2
    assert response.json()["retry_backoff"] == {"base": 1.0, "cap": 4.0}


@pytest.mark.parametrize(
    ("overrides", "error"),
    [
        ({"TASKS_DEFAULT_MAX_ATTEMPTS": 0}, "tasks.E003"),
        ({"TASKS_DEFAULT_MAX_ATTEMPTS": 101}, "tasks.E003"),
        ({"TASKS_DEFAULT_BACKOFF_BASE_SECONDS": -1.0}, "tasks.E004"),
        ({"TASKS_DEFAULT_BACKOFF_CAP_SECONDS": 1.0}, "tasks.E004"),  # below the base (2 s)
    ],
)
def test_bad_defaults_fail_the_system_checks(overrides: dict, error: str) -> None:
    with override_settings(**overrides):
        ids = {message.id for message in checks.run_checks()}
    assert error in ids
    assert error not in {message.id for message in checks.run_checks()}
