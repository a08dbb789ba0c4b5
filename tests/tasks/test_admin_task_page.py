"""A task's admin page reads first: its summary (badges, the schedule in words, next fire times
in the task's zone and the viewer's, expectations, keys, calendars, the strip of its last runs
and their table) comes before any form field, and the form still edits the task."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client
from django.urls import reverse

from accounts.preferences import set_zone
from tasks.models import Calendar, TaskHealth
from tests.factories import RunFactory, TaskFactory, UserFactory

pytestmark = pytest.mark.django_db

BASE = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def ended(task, at: datetime, status: str, error: str = ""):
    return RunFactory(
        task=task,
        scheduled_at=at,
        status=status,
        attempt=1,
        started_at=at,
        finished_at=at + timedelta(seconds=90),
        error=error,
    )


@pytest.fixture
def alice():
    return UserFactory(username="alice")


@pytest.fixture
def nightly(alice):
    holidays = Calendar.objects.create(owner=alice, name="Bavarian holidays")
    task = TaskFactory(
        owner=alice,
        name="nightly export",
        schedule={
            "type": "daily",
            "at": "09:00:00",
            "timezone": "Europe/Berlin",
            "exclude": [str(holidays.pk)],
        },
        schedule_type="daily",
        next_unplanned_at=datetime(2099, 1, 5, 8, 0, tzinfo=UTC),
        concurrency={"key": "warehouse-db", "limit": 2},
        expect={"failure_streak": 3},
    )
    TaskHealth.objects.create(
        task=task,
        health="failing",
        failure_streak=3,
        failures=4,
        succeeded_at=BASE,
        changed_at=BASE,
        late_through=BASE,
        slow_through=BASE,
    )
    return task


def page_of(client: Client, task) -> str:
    response = client.get(reverse("admin:tasks_task_change", args=[task.pk]))
    assert response.status_code == 200
    return response.content.decode()


def test_the_summary_comes_before_the_first_form_field(alice, nightly) -> None:
    html = page_of(signed_in(alice), nightly)

    summary = html.index('id="task-summary"')
    first_field = html.index('name="name"')
    assert summary < first_field
    before_form = html[summary:first_field]
    assert 'class="badge tone-ok">active<' in before_form
    assert 'class="badge tone-bad">failing<' in before_form
    assert "At 09:00 every day" in before_form and "Europe/Berlin" in before_form
    assert "warehouse-db: at most 2 running" in before_form
    assert "3 times in a row" in before_form and "failures in a row" in before_form
    assert "Bavarian holidays" in before_form
    assert 'id="task-edit"' in html and 'id="edit"' in html  # the form is still there to edit


def test_next_fire_times_are_in_the_task_zone_and_the_viewer_zone(alice, nightly) -> None:
    set_zone(user=alice, zone="America/New_York")

    html = page_of(signed_in(alice), nightly)

    # 2099-01-05 08:00 UTC is 09:00 in Berlin and 03:00 in New York.
    assert "Mon 2099-01-05 09:00:00 CET" in html
    assert "2099-01-05 03:00:00 EST" in html
    assert "in your zone (America/New_York" in html


def test_the_strip_shows_the_last_thirty_runs_in_their_colours_linking_to_each(
    alice, nightly
) -> None:
    runs = [ended(nightly, BASE + timedelta(days=i), "succeeded") for i in range(32)]
    runs.append(ended(nightly, BASE + timedelta(days=40), "failed", "Traceback\nValueError: bad"))

    html = page_of(signed_in(alice), nightly)

    strip = re.search(r'<span class="run-strip">(.*?)</span>', html, re.S)
    assert strip is not None
    squares = re.findall(
        r'<a class="sq tone-(\w+)" href="/admin/tasks/run/([0-9a-f-]+)/change/"', strip.group(1)
    )
    assert len(squares) == 30
    assert squares[-1] == ("bad", str(runs[-1].pk))  # the newest, a failure, rightmost in red
    assert squares[0] == ("ok", str(runs[3].pk))  # the oldest of the thirty, leftmost
    # The runs table: its duration and the error's last line.
    assert "1 m 30 s" in html and "ValueError: bad" in html


def test_another_users_task_page_is_not_found(alice, nightly) -> None:
    bob = signed_in(UserFactory(username="bob"))
    response = bob.get(reverse("admin:tasks_task_change", args=[nightly.pk]))
    assert response.status_code == 404
