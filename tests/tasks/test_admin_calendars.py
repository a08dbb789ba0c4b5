"""The calendars' admin: the API's validation and services behind the form, so a change
re-plans the tasks using the calendar and a calendar in use is not deleted."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from tasks.db import db_now
from tasks.models import Calendar, Run
from tests.factories import UserFactory
from tests.tasks.api.conftest import HANDLER

pytestmark = pytest.mark.django_db
DAILY_FROM_CHRISTMAS_EVE = {
    "type": "daily",
    "at": "09:00",
    "timezone": "Europe/Berlin",
    "start_at": "2030-12-24T00:00:00",
}


@pytest.fixture
def create(api: APIClient) -> Callable[..., dict]:
    def _create(**body: object) -> dict:
        response = api.post("/api/v1/tasks", {**HANDLER, **body}, format="json")
        assert response.status_code == 201, response.content
        return response.json()

    return _create


def signed_in(user) -> Client:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(user)
    return client


def fields(**changes: str) -> dict[str, str]:
    body = {
        "name": "Bavaria",
        "timezone": "Europe/Berlin",
        "holidays_country": "de",
        "holidays_subdivision": "by",
        "dates": "2030-12-31\n2030-12-24\n",
        "windows": "2030-12-27 18:00 / 2030-12-28 06:00",
    }
    return {**body, **changes}


def test_a_user_adds_a_calendar_as_the_api_would_store_it(user) -> None:
    response = signed_in(user).post(reverse("admin:tasks_calendar_add"), fields())

    assert response.status_code == 302, response.content.decode()
    calendar = Calendar.objects.get()
    assert calendar.owner == user
    assert calendar.holidays == {"country": "DE", "subdivision": "BY"}
    assert calendar.dates == ["2030-12-24", "2030-12-31"]
    assert calendar.windows == [{"start": "2030-12-27T17:00:00Z", "end": "2030-12-28T05:00:00Z"}]


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"holidays_country": "XX"}, "holidays: country: Unknown country"),
        ({"dates": "2030-13-01"}, "dates"),
        ({"windows": "2030-12-28 06:00 / 2030-12-27 18:00"}, "windows"),
        ({"windows": "2030-12-28 06:00"}, "write start / end"),
    ],
)
def test_bad_input_is_shown_on_the_field_and_nothing_is_saved(user, changes, named) -> None:
    response = signed_in(user).post(reverse("admin:tasks_calendar_add"), fields(**changes))

    assert response.status_code == 200
    assert named in response.content.decode()
    assert not Calendar.objects.exists()


def test_changing_a_calendar_in_the_admin_replans_the_tasks_using_it(
    user, create: Callable[..., dict]
) -> None:
    today = db_now().date()
    excluded = f"{today}\n{today + timedelta(days=1)}"
    signed_in(user).post(
        reverse("admin:tasks_calendar_add"), fields(timezone="UTC", dates=excluded, windows="")
    )
    calendar = Calendar.objects.get()
    task = create(schedule={"type": "interval", "every": 10, "exclude": [str(calendar.pk)]})
    runs = Run.objects.filter(task_id=task["id"])
    assert runs.exists() and not runs.exclude(status="skipped").exists()
    assert runs.filter(error__startswith="excluded: ").count() == runs.count()

    page = reverse("admin:tasks_calendar_change", args=[calendar.pk])
    shown = signed_in(user).get(page).content.decode()
    assert str(today) in shown and task["name"] in shown, "its dates and the tasks using it"
    response = signed_in(user).post(page, fields(timezone="UTC", dates="", windows=""))

    assert response.status_code == 302, response.content.decode()
    assert runs.filter(status="scheduled").exists(), "re-planned in the same change"
    times = list(runs.values_list("scheduled_at", flat=True))
    assert len(times) == len(set(times)), "each occurrence once"


def test_a_calendar_in_use_is_not_deleted(user, create: Callable[..., dict]) -> None:
    operator = UserFactory(is_staff=True, is_superuser=True)
    signed_in(user).post(reverse("admin:tasks_calendar_add"), fields())
    calendar = Calendar.objects.get()
    task = create(
        name="nightly", schedule={**DAILY_FROM_CHRISTMAS_EVE, "exclude": [str(calendar.pk)]}
    )
    client = signed_in(operator)

    response = client.post(
        reverse("admin:tasks_calendar_delete", args=[calendar.pk]), {"post": "yes"}, follow=True
    )

    assert Calendar.objects.filter(pk=calendar.pk).exists()
    assert "Not deleted" in response.content.decode() and task["id"] in response.content.decode()
    changelist = client.get(reverse("admin:tasks_calendar_changelist")).content.decode()
    assert "delete_selected" not in changelist, "no bulk delete around the check"


def test_another_users_calendar_is_a_404(user) -> None:
    signed_in(user).post(reverse("admin:tasks_calendar_add"), fields())
    calendar = Calendar.objects.get()
    stranger = signed_in(UserFactory())

    assert (
        stranger.get(reverse("admin:tasks_calendar_change", args=[calendar.pk])).status_code == 404
    )
    listed = stranger.get(reverse("admin:tasks_calendar_changelist")).content.decode()
    assert "Bavaria" not in listed
