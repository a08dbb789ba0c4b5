"""The admin's task form shows and edits every member of a task and its schedule, and a change
of one field keeps every other: the page posted back as a browser posts it."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from tasks.models import Calendar, Task
from tests.factories import UserFactory


@pytest.fixture
def admin_user(db):
    return UserFactory(username="operator", is_staff=True, is_superuser=True)


@pytest.fixture
def staff(client, admin_user):
    client.force_login(admin_user)
    return client


def page_values(staff, url: str) -> dict[str, Any]:
    """What a browser posts for the page's form untouched: each field's value as rendered."""
    form = staff.get(url).context["adminform"].form
    values: dict[str, Any] = {"runs-TOTAL_FORMS": "0", "runs-INITIAL_FORMS": "0"}
    for name in form.fields:
        value = form[name].value()
        if value is None or value is False:
            continue
        values[name] = "on" if value is True else value
    return values


def create(api, body: dict) -> Task:
    response = api.post("/api/v1/tasks", {"kind": "handler", "payload": {"name": "noop"}, **body})
    assert response.status_code == 201, response.content
    return Task.objects.get(pk=response.json()["id"])


@pytest.fixture
def api_as_admin(admin_user):
    from tests.conftest import client_for

    client = client_for(admin_user)
    client.default_format = "json"
    return client


def test_changing_at_of_a_weekly_task_keeps_its_exclusions(staff, admin_user, api_as_admin):
    calendar = Calendar.objects.create(owner=admin_user, name="holidays", dates=["2030-01-01"])
    window = {"start": "2030-02-01T00:00:00Z", "end": "2030-02-02T00:00:00Z"}
    task = create(
        api_as_admin,
        {
            "schedule": {
                "type": "weekly",
                "days": ["mon", "fri"],
                "at": "09:00",
                "business_days_only": True,
                "exclude": [str(calendar.pk)],
                "exclude_windows": [window],
                "misfire_grace": 120,
            }
        },
    )
    url = reverse("admin:tasks_task_change", args=[task.pk])

    response = staff.post(url, {**page_values(staff, url), "at": "10:30"})

    assert response.status_code == 302, response.content.decode()[-3000:]
    task.refresh_from_db()
    assert task.schedule["at"] == "10:30:00"
    assert task.schedule["business_days_only"] is True
    assert task.schedule["exclude"] == [str(calendar.pk)]
    assert task.schedule["exclude_windows"] == [window]
    assert task.schedule["misfire_grace"] == 120


def test_changing_an_rrule_keeps_its_exdates(staff, api_as_admin):
    task = create(
        api_as_admin,
        {"schedule": {"type": "rrule", "rule": "FREQ=DAILY;BYHOUR=9", "exdates": ["2030-12-24"]}},
    )
    url = reverse("admin:tasks_task_change", args=[task.pk])

    response = staff.post(url, {**page_values(staff, url), "rule": "FREQ=DAILY;BYHOUR=10"})

    assert response.status_code == 302, response.content.decode()[-3000:]
    task.refresh_from_db()
    assert task.schedule["rule"] == "FREQ=DAILY;BYHOUR=10"
    assert task.schedule["exdates"] == ["2030-12-24"]


def test_a_last_friday_task_is_added_and_shown(staff, admin_user) -> None:
    url = reverse("admin:tasks_task_add")
    values = page_values(staff, url)
    values.update(
        owner=admin_user.pk,
        name="month end",
        kind="handler",
        payload='{"name": "noop"}',
        schedule_type="monthly",
        weekday="fri",
        week="-1",
        at="17:00",
    )

    response = staff.post(url, values)

    assert response.status_code == 302, response.content.decode()[-3000:]
    task = Task.objects.get()
    assert (task.schedule["weekday"], task.schedule["week"]) == ("fri", -1)
    assert "day" not in task.schedule
    change = reverse("admin:tasks_task_change", args=[task.pk])
    assert (page_values(staff, change)["weekday"], page_values(staff, change)["week"]) == (
        "fri",
        -1,
    )


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("expect", {"failure_streak": 3, "success_within": 3600.0}),
        ("concurrency", {"key": "db", "limit": 2, "scope": "owner"}),
        ("rate_limit", {"key": "crm", "limit": 5, "per": 60, "scope": "owner"}),
    ],
)
def test_the_form_shows_edits_and_keeps_task_fields(staff, api_as_admin, field, value) -> None:
    task = create(api_as_admin, {field: value})
    url = reverse("admin:tasks_task_change", args=[task.pk])
    values = page_values(staff, url)

    kept = staff.post(url, {**values, "name": "renamed"})
    assert kept.status_code == 302, kept.content.decode()[-3000:]
    task.refresh_from_db()
    assert (task.name, getattr(task, field)) == ("renamed", value)

    cleared = staff.post(url, {**values, field: "null"})
    assert cleared.status_code == 302, cleared.content.decode()[-3000:]
    task.refresh_from_db()
    assert getattr(task, field) == {}
