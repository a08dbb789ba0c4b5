""" "... all matching this filter" on the run and task lists (retry failed runs, cancel unfinished
runs, pause and resume tasks): each asks with the count, then acts on exactly those, each
through its transition, recorded in the object's history."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.admin.models import LogEntry
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from tasks.admin import bulk as admin_bulk
from tasks.models import Run, Task
from tests.factories import RunFactory, TaskFactory, UserFactory

pytestmark = pytest.mark.django_db
HOUR = timedelta(hours=1)


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


def test_cancel_matching_cancels_exactly_the_unfinished_runs_of_the_filter() -> None:
    alice = UserFactory(username="alice")
    nightly, hourly = TaskFactory(owner=alice), TaskFactory(owner=alice)
    now = timezone.now()
    unfinished = [
        RunFactory(task=nightly, scheduled_at=now),
        RunFactory(task=nightly, status="waiting_for_resource", scheduled_at=now + HOUR),
        RunFactory(
            task=nightly,
            status="running",
            attempt=1,
            worker="w1",
            started_at=now,
            heartbeat_at=now,
            scheduled_at=now + 2 * HOUR,
        ),
    ]
    others = [
        RunFactory(task=nightly, status="succeeded", finished_at=now, scheduled_at=now - HOUR),
        RunFactory(task=hourly),  # another task: outside the filter
        RunFactory(task=TaskFactory()),  # another user's
    ]
    client = Client()
    client.force_login(alice)
    url = reverse("admin:tasks_run_cancel_matching") + f"?task__id__exact={nightly.pk}"

    asked = client.get(url).content.decode()
    assert "Cancel 3 unfinished runs matching this filter" in asked
    assert statuses(unfinished) == ["scheduled", "waiting_for_resource", "running"]

    done = client.post(url, follow=True).content.decode()

    assert "Cancelled 3 unfinished runs." in done
    assert statuses(unfinished) == ["cancelled"] * 3
    assert statuses(others) == ["succeeded", "scheduled", "scheduled"]
    assert Run.objects.get(pk=unfinished[2].pk).attempts.get().outcome == "cancelled"
    logged = LogEntry.objects.filter(change_message__startswith="Cancelled (all unfinished")
    assert sorted(logged.values_list("object_id", flat=True)) == sorted(
        str(r.pk) for r in unfinished
    )


def test_a_run_finished_between_asking_and_confirming_is_counted_as_refused() -> None:
    alice = UserFactory(username="alice")
    task = TaskFactory(owner=alice)
    run = RunFactory(task=task)
    client = Client()
    client.force_login(alice)
    url = reverse("admin:tasks_run_cancel_matching") + "?q=" + str(task.pk)
    # The confirmation reads the filter again: a run that finished is no longer among them.
    assert "Cancel 1 unfinished run matching" in client.get(url).content.decode()
    Run.objects.filter(pk=run.pk).update(status="succeeded", finished_at=timezone.now())

    done = client.post(url, follow=True).content.decode()

    assert "Cancelled 0 unfinished runs." in done
    assert statuses([run]) == ["succeeded"]


@pytest.fixture
def tasks():
    alice = UserFactory(username="alice")
    mine = {
        "active": [TaskFactory(owner=alice, name=f"report {n}") for n in range(2)],
        "paused": [TaskFactory(owner=alice, name="report p", status="paused")],
        "other": [TaskFactory(owner=alice, name="backup")],  # active, outside the search
    }
    theirs = TaskFactory(name="report theirs")  # another user's, on none of alice's lists
    client = Client()
    client.force_login(alice)
    return client, mine, theirs


def task_statuses(tasks: list[Task]) -> list[str]:
    return [Task.objects.get(pk=task.pk).status for task in tasks]


def test_pause_matching_pauses_exactly_the_active_tasks_of_the_search(tasks) -> None:
    client, mine, theirs = tasks
    url = reverse("admin:tasks_task_pause_matching") + "?q=report"

    asked = client.get(url).content.decode()
    assert "Pause 2 active tasks matching this filter" in asked
    done = client.post(url, follow=True).content.decode()

    assert "Paused 2 active tasks." in done
    assert task_statuses(mine["active"]) == ["paused", "paused"]
    assert task_statuses(mine["other"] + [theirs]) == ["active", "active"]
    logged = LogEntry.objects.filter(change_message__startswith="Paused (all active tasks")
    assert sorted(logged.values_list("object_id", flat=True)) == sorted(
        str(t.pk) for t in mine["active"]
    )


def test_resume_matching_resumes_exactly_the_paused_tasks_of_the_filter(tasks) -> None:
    client, mine, _ = tasks
    also_paused = TaskFactory(owner=mine["other"][0].owner, name="backup p", status="paused")
    url = reverse("admin:tasks_task_resume_matching") + "?q=report&status__exact=paused"

    assert "Resume 1 paused task matching this filter" in client.get(url).content.decode()
    done = client.post(url, follow=True)

    assert "Resumed 1 paused task." in done.content.decode()
    assert task_statuses(mine["paused"]) != ["paused"]
    assert task_statuses([also_paused]) == ["paused"]
    assert done.redirect_chain[-1][0].endswith("?q=report&status__exact=paused")


def test_an_operator_pauses_everyones_matching_tasks(tasks) -> None:
    _, mine, theirs = tasks
    operator = Client()
    operator.force_login(UserFactory(is_staff=True, is_superuser=True))
    url = reverse("admin:tasks_task_pause_matching") + "?q=report"

    assert "Pause 3 active tasks" in operator.get(url).content.decode()
    operator.post(url)

    assert task_statuses(mine["active"] + [theirs]) == ["paused"] * 3


def test_the_task_list_links_pause_and_resume_with_its_filter(tasks) -> None:
    client, *_ = tasks
    page = client.get(reverse("admin:tasks_task_changelist"), {"q": "report"}).content.decode()

    for name in ("pause", "resume"):
        assert f'href="{reverse(f"admin:tasks_task_{name}_matching")}?q=report"' in page


def test_more_than_a_batch_is_done_one_batch_per_confirmation(tasks, monkeypatch) -> None:
    client, mine, _ = tasks
    owner = mine["paused"][0].owner
    paused = mine["paused"] + [TaskFactory(owner=owner, status="paused") for _ in range(2)]
    # Oldest first is id order (uuid7: by millisecond; two made in one millisecond fall in
    # either order), so the expected order is the ids'.
    paused.sort(key=lambda task: task.pk)
    monkeypatch.setattr(admin_bulk, "BATCH", 2)
    url = reverse("admin:tasks_task_resume_matching")

    asked = client.get(url).content.decode()
    assert "Resume 2 paused tasks matching this filter (the first 2; more match)" in asked
    first = client.post(url, follow=True).content.decode()
    assert "Resumed 2 paused tasks. More match: resume again for the next batch." in first
    assert [s == "paused" for s in task_statuses(paused)] == [False, False, True], "oldest first"

    second = client.post(url, follow=True).content.decode()
    assert "Resumed 1 paused task." in second and "More match" not in second
    assert "paused" not in task_statuses(paused)
