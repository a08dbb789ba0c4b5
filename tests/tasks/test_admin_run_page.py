"""A run's page has retry and cancel buttons that do what the list actions do."""

from __future__ import annotations

import re

import pytest
from django.contrib.admin.models import LogEntry
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from tasks.models import Attempt, Run
from tests.factories import RunFactory, TaskFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice():
    return UserFactory(username="alice")


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def page(client: Client, run: Run) -> str:
    response = client.get(reverse("admin:tasks_run_change", args=[run.pk]))
    assert response.status_code == 200
    return response.content.decode()


def test_a_failed_run_is_retried_from_its_page(alice) -> None:
    run = RunFactory(task=TaskFactory(owner=alice), status="failed", finished_at=timezone.now())
    client = signed_in(alice)
    assert 'id="run-retry"' in page(client, run) and 'id="run-cancel"' not in page(client, run)

    response = client.post(reverse("admin:tasks_run_retry", args=[run.pk]), follow=True)

    run.refresh_from_db()
    assert run.status == "scheduled"
    assert "Retried." in response.content.decode()
    assert LogEntry.objects.filter(object_id=str(run.pk), change_message="Retried").exists()


def test_a_scheduled_run_is_cancelled_from_its_page(alice) -> None:
    run = RunFactory(task=TaskFactory(owner=alice))
    client = signed_in(alice)
    assert 'id="run-cancel"' in page(client, run) and 'id="run-retry"' not in page(client, run)

    client.post(reverse("admin:tasks_run_cancel", args=[run.pk]))

    run.refresh_from_db()
    assert run.status == "cancelled"


def test_a_refused_button_says_why_and_changes_nothing(alice) -> None:
    run = RunFactory(task=TaskFactory(owner=alice), status="succeeded", finished_at=timezone.now())
    client = signed_in(alice)

    response = client.post(reverse("admin:tasks_run_retry", args=[run.pk]), follow=True)

    assert "Not done: only failed or cancelled runs can be retried" in response.content.decode()
    run.refresh_from_db()
    assert run.status == "succeeded"


def test_another_users_run_is_a_404_and_a_get_does_nothing(alice) -> None:
    theirs = RunFactory(status="failed", finished_at=timezone.now())
    mine = RunFactory(task=TaskFactory(owner=alice), status="failed", finished_at=timezone.now())
    client = signed_in(alice)

    assert client.post(reverse("admin:tasks_run_retry", args=[theirs.pk])).status_code == 404
    assert client.get(reverse("admin:tasks_run_retry", args=[mine.pk])).status_code == 405
    theirs.refresh_from_db()
    mine.refresh_from_db()
    assert (theirs.status, mine.status) == ("failed", "failed")


def test_a_failed_runs_page_shows_its_error_and_duration_above_its_other_fields(alice) -> None:
    started = timezone.now() - timezone.timedelta(minutes=5)
    task = TaskFactory(
        owner=alice,
        name="nightly export",
        schedule={"type": "interval", "every": 3600},
        schedule_type="interval",
    )
    run = RunFactory(
        task=task,
        status="failed",
        attempt=2,
        started_at=started,
        finished_at=started + timezone.timedelta(seconds=75),
        error="Traceback (most recent call last):\n  ...\nConnectionError: warehouse refused",
        output="exported 0 rows",
    )
    Attempt.objects.create(
        run=run,
        number=1,
        started_at=started - timezone.timedelta(minutes=2),
        finished_at=started - timezone.timedelta(minutes=1),
        outcome="timed_out",
        error="no answer in 60 s",
    )
    Attempt.objects.create(
        run=run,
        number=2,
        started_at=started,
        finished_at=started + timezone.timedelta(seconds=75),
        outcome="failed",
        error="ConnectionError: warehouse refused",
    )

    html = page(signed_in(alice), run)

    error = html.index('id="run-error"')
    assert html.index('class="badge tone-bad">failed<') < error
    assert html.index('id="run-duration">1 m 15 s<') < error
    # Every field of the run, the internal ones too, comes after the error.
    assert error < html.index('id="fields"') < html.index("field-cpu_millis")
    assert "ConnectionError: warehouse refused" in html[error:]
    assert html.index("Attempts") < html.index("Output") < html.index("Every hour")
    assert 'class="badge tone-bad">timed out<' in html and "exported 0 rows" in html
    # The attempts on one line from 3 m 15 s before the end: 60 s, a 60 s backoff, then 75 s.
    bars = re.findall(r'attempt-bar tone-(\w+)" style="left: ([\d.]+)%; width: ([\d.]+)%', html)
    assert bars == [("bad", "0.0", "30.77"), ("bad", "61.54", "38.46")]
