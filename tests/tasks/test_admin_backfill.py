"""The task page's Backfill button and form do what POST /tasks/{id}/backfill does, for the
signed-in user's own tasks only."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.admin.models import LogEntry
from django.test import Client
from django.urls import reverse

from tasks.db import db_now
from tasks.models import Run, Task
from tests.factories import UserFactory
from tests.tasks.recurring_support import iso, recurring_task

pytestmark = pytest.mark.django_db


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def daily(owner) -> Task:
    now = db_now()
    raw = {"type": "daily", "at": "03:00", "start_at": iso(now - timedelta(days=30))}
    return recurring_task(owner, raw, now=now, next_unplanned_at=now + timedelta(days=1))


def when(at) -> str:
    return f"{at:%Y-%m-%dT%H:%M:%S}"  # as the form's datetime-local field sends it (UTC)


def test_the_form_backfills_the_task_and_says_how_many() -> None:
    alice = UserFactory()
    task = daily(alice)
    client = signed_in(alice)
    page = client.get(reverse("admin:tasks_task_change", args=[task.pk])).content.decode()
    assert 'id="task-backfill"' in page
    url = reverse("admin:tasks_task_backfill", args=[task.pk])
    assert 'id="backfill-form"' in client.get(url).content.decode()
    end = db_now().replace(microsecond=0)

    response = client.post(
        url,
        {"start": when(end - timedelta(days=10)), "end": when(end), "max_runs": 1000},
        follow=True,
    )

    assert "Backfilled: 10 runs created, 0 excluded" in response.content.decode()
    runs = Run.objects.filter(task=task, backfill=True)
    assert runs.count() == 10 and not runs.exclude(missed_after=None).exists()
    assert LogEntry.objects.filter(
        object_id=str(task.pk), change_message__startswith="Backfilled"
    ).exists()

    again = client.post(
        url,
        {"start": when(end - timedelta(days=10)), "end": when(end), "max_runs": 1000},
        follow=True,
    )
    assert (
        "0 runs created, 0 excluded (recorded skipped), 10 already recorded"
        in again.content.decode()
    )


def test_a_refusal_is_shown_on_its_field_and_creates_nothing() -> None:
    alice = UserFactory()
    task = daily(alice)
    client = signed_in(alice)
    end = db_now().replace(microsecond=0)
    url = reverse("admin:tasks_task_backfill", args=[task.pk])

    response = client.post(
        url, {"start": when(end - timedelta(days=10)), "end": when(end), "max_runs": 5}
    )

    assert response.status_code == 200
    assert response.context["form"].errors["max_runs"][0].startswith("The range holds more than 5")
    future = client.post(
        url, {"start": when(end), "end": when(end + timedelta(days=1)), "max_runs": 5}
    )
    assert "end" in future.context["form"].errors
    assert not Run.objects.filter(task=task, backfill=True).exists()


def test_the_list_action_opens_the_form_of_the_one_task_selected() -> None:
    alice = UserFactory()
    task = daily(alice)
    client = signed_in(alice)
    response = client.post(
        reverse("admin:tasks_task_changelist"),
        {"action": "backfill", "_selected_action": [task.pk]},
    )
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:tasks_task_backfill", args=[task.pk])


def test_another_users_task_is_not_found() -> None:
    task = daily(UserFactory())
    client = signed_in(UserFactory())
    end = db_now().replace(microsecond=0)
    url = reverse("admin:tasks_task_backfill", args=[task.pk])
    assert client.get(url).status_code == 404
    posted = client.post(
        url, {"start": when(end - timedelta(days=2)), "end": when(end), "max_runs": 9}
    )
    assert posted.status_code == 404
    assert not Run.objects.filter(task=task).exists()
