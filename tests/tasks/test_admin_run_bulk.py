""" "Retry all failed runs matching this filter": asks with the count, retries exactly those."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import LogEntry
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from tasks.models import Run
from tests.factories import RunFactory, TaskFactory, UserFactory

pytestmark = pytest.mark.django_db


def failed(task, **fields) -> Run:
    return RunFactory(task=task, status="failed", finished_at=timezone.now(), **fields)


@pytest.fixture
def runs():
    alice = UserFactory(username="alice")
    nightly, hourly = TaskFactory(owner=alice), TaskFactory(owner=alice)
    matching = [failed(nightly) for _ in range(3)]
    others = [
        failed(hourly),  # another task: outside the filter
        RunFactory(task=nightly, status="succeeded", finished_at=timezone.now()),
        failed(TaskFactory()),  # another user's, on no filter of alice's
    ]
    client = Client()
    client.force_login(alice)
    return client, nightly, matching, others


def statuses(runs: list[Run]) -> list[str]:
    return [Run.objects.get(pk=run.pk).status for run in runs]


def test_the_confirmation_counts_and_the_retry_does_exactly_those(runs) -> None:
    client, nightly, matching, others = runs
    url = reverse("admin:tasks_run_retry_matching") + f"?task__id__exact={nightly.pk}"

    asked = client.get(url).content.decode()
    assert "Retry 3 failed runs matching this filter" in asked
    assert statuses(matching) == ["failed"] * 3, "asking changes nothing"

    done = client.post(url, follow=True)

    assert "Retried 3 failed runs." in done.content.decode()
    assert statuses(matching) == ["scheduled"] * 3
    assert statuses(others) == ["failed", "succeeded", "failed"]
    logged = LogEntry.objects.filter(change_message__startswith="Retried (all failed")
    assert sorted(logged.values_list("object_id", flat=True)) == sorted(str(r.pk) for r in matching)
    assert done.redirect_chain[-1][0].endswith(f"?task__id__exact={nightly.pk}")


def test_without_a_filter_it_is_every_failed_run_of_the_user_only(runs) -> None:
    client, _, matching, others = runs
    url = reverse("admin:tasks_run_retry_matching")

    assert "Retry 4 failed runs" in client.get(url).content.decode()
    client.post(url)

    assert statuses(matching) == ["scheduled"] * 3
    assert statuses(others) == ["scheduled", "succeeded", "failed"]


def test_nothing_matching_says_so(runs) -> None:
    client, *_ = runs
    url = reverse("admin:tasks_run_retry_matching") + "?status__exact=succeeded"

    assert "No failed run matches this filter." in client.get(url).content.decode()
    assert "Retried 0 failed runs." in client.post(url, follow=True).content.decode()


def test_the_run_list_links_the_retry_with_its_filter(runs) -> None:
    client, nightly, _, _ = runs
    page = client.get(reverse("admin:tasks_run_changelist"), {"task__id__exact": nightly.pk})

    link = reverse("admin:tasks_run_retry_matching") + f"?task__id__exact={nightly.pk}"
    assert f'href="{link}"' in page.content.decode()
