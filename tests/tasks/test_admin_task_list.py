"""The task list scans: status and health badges, the schedule in words, times in the viewer's
zone, cancelled tasks out unless asked for, search by name or id, and each task's recent runs
as a strip read for the whole page in one query."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from accounts.preferences import set_zone
from tests.factories import RunFactory, TaskFactory, UserFactory

pytestmark = pytest.mark.django_db

BASE = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LIST = reverse("admin:tasks_task_changelist")


@pytest.fixture
def alice():
    return UserFactory(username="alice")


@pytest.fixture
def client(alice) -> Client:
    client = Client()
    client.force_login(alice)
    return client


def daily(owner, name: str, **fields):
    return TaskFactory(
        owner=owner,
        name=name,
        schedule={"type": "daily", "at": "09:00:00", "timezone": "Europe/Berlin"},
        schedule_type="daily",
        **fields,
    )


def with_runs(task, statuses: list[str]):
    for i, status in enumerate(statuses):
        at = BASE + timedelta(hours=i)
        RunFactory(
            task=task,
            scheduled_at=at,
            status=status,
            attempt=1,
            started_at=at,
            finished_at=at + timedelta(seconds=5),
        )
    return task


def test_rows_carry_badges_the_schedule_in_words_and_times_in_the_viewers_zone(
    client, alice
) -> None:
    daily(alice, "report", next_unplanned_at=datetime(2099, 1, 5, 8, 0, tzinfo=UTC))
    set_zone(user=alice, zone="Europe/Berlin")

    html = client.get(LIST).content.decode()

    assert 'class="badge tone-ok">active<' in html and 'class="badge tone-ok">up<' in html
    assert "At 09:00 every day (Europe/Berlin)" in html
    assert "2099-01-05 09:00:00 CET" in html  # the next run, in the viewer's zone
    assert "Times in Europe/Berlin" in html


def test_cancelled_tasks_are_hidden_unless_asked_for(client, alice) -> None:
    daily(alice, "kept")
    daily(alice, "gone", status="cancelled")

    assert ">gone<" not in client.get(LIST).content.decode()
    assert ">gone<" in client.get(LIST, {"cancelled": "shown"}).content.decode()
    by_status = client.get(LIST, {"status__exact": "cancelled"}).content.decode()
    assert ">gone<" in by_status and ">kept<" not in by_status


def test_search_finds_a_task_by_name_or_by_id(client, alice) -> None:
    report = daily(alice, "monthly report")
    daily(alice, "cleanup")

    by_name = client.get(LIST, {"q": "report"}).content.decode()
    by_id = client.get(LIST, {"q": str(report.pk)}).content.decode()

    assert ">monthly report<" in by_name and ">cleanup<" not in by_name
    assert ">monthly report<" in by_id and ">cleanup<" not in by_id


def test_each_row_has_a_strip_of_its_recent_runs(client, alice) -> None:
    with_runs(daily(alice, "flaky"), ["succeeded", "failed", "succeeded"])

    html = client.get(LIST).content.decode()

    strip = re.search(r'<span class="run-strip">(.*?)</span>', html, re.S)
    assert strip is not None
    assert re.findall(r"sq tone-(\w+)", strip.group(1)) == ["ok", "bad", "ok"]


def test_the_strips_of_a_page_cost_one_query_whatever_the_number_of_tasks(client, alice) -> None:
    with_runs(daily(alice, "first"), ["succeeded"])

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(LIST).status_code == 200
        return len(captured)

    one = queries()
    for i in range(5):
        with_runs(daily(alice, f"more {i}"), ["failed", "succeeded"])
    assert queries() == one
