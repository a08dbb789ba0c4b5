"""The list filters: the run list by a scheduled_at range typed in, the task list by its last
run's status (on one owner's tasks)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client
from django.urls import reverse

from tasks.admin.lists import parse_instant
from tests.factories import RunFactory, TaskFactory, UserFactory

pytestmark = pytest.mark.django_db
DAY = datetime(2026, 11, 30, tzinfo=UTC)


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def shown_runs(client: Client, **query: str) -> list[str]:
    page = client.get(reverse("admin:tasks_run_changelist"), query)
    assert page.status_code == 200
    return sorted(str(run.pk) for run in page.context["cl"].result_list)


def test_the_run_list_filters_a_typed_range_from_inclusive_before_exclusive() -> None:
    alice = UserFactory()
    task = TaskFactory(owner=alice)
    at = {
        hour: RunFactory(task=task, scheduled_at=DAY + timedelta(hours=hour)) for hour in range(4)
    }
    RunFactory(scheduled_at=DAY + timedelta(hours=1))  # another user's, in the range
    client = signed_in(alice)

    shown = shown_runs(
        client, scheduled_at__gte="2026-11-30 01:00", scheduled_at__lt="2026-11-30 03:00"
    )
    assert shown == sorted([str(at[1].pk), str(at[2].pk)])
    assert shown_runs(client, scheduled_at__gte="2026-11-30T02:00:00Z") == sorted(
        [str(at[2].pk), str(at[3].pk)]
    )
    assert shown_runs(client, scheduled_at__lt="2026-11-30 01:00", scheduled_at__gte="") == [
        str(at[0].pk)
    ]
    # A zone in the text wins over the admin's: 03:00+01:00 is 02:00 UTC.
    assert shown_runs(client, scheduled_at__lt="2026-11-30T03:00+01:00") == sorted(
        [str(at[0].pk), str(at[1].pk)]
    )


def test_a_range_that_is_no_date_is_the_lists_own_error_page() -> None:
    client = signed_in(UserFactory())
    page = client.get(reverse("admin:tasks_run_changelist"), {"scheduled_at__gte": "yesterday"})
    assert page.status_code == 302 and page["Location"].endswith("?e=1")


def test_the_range_form_keeps_the_lists_other_filters_and_search() -> None:
    client = signed_in(UserFactory())
    page = client.get(
        reverse("admin:tasks_run_changelist"),
        {"status__exact": "failed", "q": "nightly", "scheduled_at__gte": "2026-11-30"},
    ).content.decode()
    assert '<input type="hidden" name="status__exact" value="failed">' in page
    assert '<input type="hidden" name="q" value="nightly">' in page
    assert 'name="scheduled_at__gte" value="2026-11-30"' in page


def test_parse_instant_reads_dates_times_and_zones() -> None:
    assert parse_instant("2026-11-30") == DAY
    assert parse_instant(" 2026-11-30 08:30 ") == DAY + timedelta(hours=8, minutes=30)
    assert parse_instant("2026-11-30T08:30:00-02:00") == DAY + timedelta(hours=10, minutes=30)
    assert parse_instant("2026-02-30") is None
    assert parse_instant("soon") is None


def last_run_of(task, status: str, hours_ago: int) -> None:
    at = datetime.now(UTC) - timedelta(hours=hours_ago)
    finished = at if status != "running" else None
    RunFactory(
        task=task, status=status, attempt=1, scheduled_at=at, started_at=at, finished_at=finished
    )


def shown_tasks(client: Client, **query: str) -> list[str]:
    page = client.get(reverse("admin:tasks_task_changelist"), query)
    assert page.status_code == 200, page.get("Location")
    return sorted(task.name for task in page.context["cl"].result_list)


@pytest.fixture
def histories():
    alice = UserFactory(username="alice")
    broken, recovered, fresh = (
        TaskFactory(owner=alice, name=n) for n in ("broken", "recovered", "fresh")
    )
    last_run_of(broken, "succeeded", 2)
    last_run_of(broken, "failed", 1)  # its latest: failed
    last_run_of(recovered, "failed", 2)
    last_run_of(recovered, "succeeded", 1)  # failed before, not last
    RunFactory(task=fresh, scheduled_at=datetime.now(UTC) + timedelta(hours=1))  # planned only
    theirs = TaskFactory(name="theirs")
    last_run_of(theirs, "failed", 1)
    return alice, theirs


def test_a_user_filters_their_tasks_whose_last_run_failed(histories) -> None:
    alice, _ = histories
    client = signed_in(alice)
    assert shown_tasks(client, last_run="failed") == ["broken"]
    assert shown_tasks(client, last_run="succeeded") == ["recovered"]
    assert "?last_run=failed" in client.get(reverse("admin:tasks_task_changelist")).content.decode()


def test_an_operator_has_the_filter_on_one_owners_tasks_only(histories) -> None:
    alice, theirs = histories
    operator = signed_in(UserFactory(is_staff=True, is_superuser=True))
    url = reverse("admin:tasks_task_changelist")

    assert "last_run=failed" not in operator.get(url).content.decode()
    assert operator.get(url, {"last_run": "failed"})["Location"].endswith("?e=1")
    assert shown_tasks(operator, owner=str(alice.pk), last_run="failed") == ["broken"]
    assert shown_tasks(operator, owner=str(theirs.owner_id), last_run="failed") == ["theirs"]
