"""The one definition of a task's fields, held equal to every list that names them."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tasks import schedules
from tasks.admin.forms import JSON_TASK_FIELDS, RECURRING_FIELDS, TYPE_FIELDS, TaskAdminForm
from tasks.api.bodies import TaskUploadBody
from tasks.api.serializers import TaskInputSerializer
from tasks.models import Task
from tasks.task_fields import BODY_FIELDS, JSON_TEXT_FIELDS, NULL_CLEARS, body_of

pytestmark = pytest.mark.django_db


def test_body_of_is_what_get_shows(api: APIClient) -> None:
    body = {
        "kind": "handler",
        "payload": {"name": "noop"},
        "schedule": {"type": "weekly", "days": ["mon"], "at": "09:00", "business_days_only": True},
        "timeout": 5,
        "resources": {"cpu": "1"},
        "concurrency": {"key": "db", "limit": 1},
        "expect": {"failure_streak": 2},
    }
    created = api.post("/api/v1/tasks", body, format="json")
    assert created.status_code == 201, created.content
    shown = api.get(f"/api/v1/tasks/{created.json()['id']}").json()

    task = Task.objects.get(pk=shown["id"])

    assert body_of(task) == {name: shown[name] for name in BODY_FIELDS}
    assert body_of(task)["rate_limit"] is None


def test_the_api_bodies_take_every_field() -> None:
    writable = {n for n, f in TaskInputSerializer().fields.items() if not f.read_only}
    assert writable == {*BODY_FIELDS, "file"}
    assert set(TaskUploadBody().fields) == {*BODY_FIELDS, "file"} - {"kind"}
    assert set(JSON_TEXT_FIELDS) <= set(BODY_FIELDS) and set(NULL_CLEARS) <= set(BODY_FIELDS)


def test_the_admin_form_has_every_field_and_schedule_member() -> None:
    form = TaskAdminForm()
    # `retry_backoff` as backoff_base and backoff_cap, `schedule` as the schedule fields
    shown = set(form.fields) | {"retry_backoff", "schedule"}
    assert set(BODY_FIELDS) <= shown
    assert set(JSON_TASK_FIELDS) <= set(form.fields)
    for kind in schedules.TYPES:
        on_form = set(TYPE_FIELDS[kind]) | (set() if kind == "once" else set(RECURRING_FIELDS))
        # `anchor` is kept as it is; a one-time `delay` is stored as its run_at.
        assert set(schedules.members(kind)) - on_form <= {"anchor", "delay"}, kind
        assert on_form <= set(form.fields)
