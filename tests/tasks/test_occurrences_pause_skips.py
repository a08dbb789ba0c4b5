"""A pause suppresses the occurrences it covers: resumed, the task records them `skipped`
(reason `paused: ...`) instead of running them all at once; the ones due before the pause still
follow the misfire policy, and every occurrence is recorded exactly once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import AbstractBaseUser

from notifications.models import Notification
from tasks import occurrences, schedules
from tasks.models import Run, Task
from tasks.transitions import creation, lifecycle, plan
from tests.factories import UserFactory
from tests.notifications.conftest import ChannelFactory

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
S = timedelta(seconds=1)


@pytest.fixture
def owner(db) -> AbstractBaseUser:
    return UserFactory()


def every_ten_seconds(owner: AbstractBaseUser, **schedule: object) -> Task:
    raw = {"type": "interval", "every": 10, **schedule}
    data = {
        "kind": "handler",
        "payload": {"name": "noop", "args": {}},
        "schedule": schedules.normalize(raw, now=T0),
    }
    return creation.create_task(owner=owner, data=data, now=T0)[0]


def history(task: Task) -> dict[int, tuple[str, str]]:
    """Seconds after T0 -> (status, error) of each of the task's runs."""
    runs = Run.objects.filter(task=task).order_by("scheduled_at")
    return {int((r.scheduled_at - T0).total_seconds()): (r.status, r.error) for r in runs}


@pytest.mark.parametrize("misfire", ["run_once", "skip", "run_all"])
def test_occurrences_inside_a_pause_are_skipped_whatever_the_misfire_policy(owner, misfire):
    task = every_ten_seconds(owner, misfire=misfire)

    lifecycle.pause_task(task=task, now=T0 + 5 * S)
    lifecycle.resume_task(task=task, now=T0 + 25 * S)

    runs = history(task)
    assert runs[10] == runs[20] == ("skipped", occurrences.PAUSED_REASON)
    assert runs[30] == ("scheduled", "") and runs[50] == ("scheduled", "")
    assert sorted(runs) == list(range(10, 60, 10))  # each occurrence once, none left out


def test_an_occurrence_due_before_the_pause_follows_the_misfire_policy(owner) -> None:
    task = every_ten_seconds(owner)  # run_once, with the default grace of a minute

    lifecycle.pause_task(task=task, now=T0 + 15 * S)  # 10 s is due, not started: withdrawn
    lifecycle.resume_task(task=task, now=T0 + 25 * S)

    runs = history(task)
    assert runs[10] == ("scheduled", "")  # late, within the grace: it runs
    assert runs[20] == ("skipped", occurrences.PAUSED_REASON)


def test_a_long_pause_is_recorded_over_several_passes(owner, settings) -> None:
    settings.TASKS_MISFIRE_GRACE_SECONDS = 1.0
    task = every_ten_seconds(owner)
    resumed = T0 + timedelta(hours=4)  # 1,440 occurrences: more than one pass plans

    lifecycle.pause_task(task=task, now=T0 + 5 * S)
    lifecycle.resume_task(task=task, now=resumed)
    plan.plan_due_tasks(now=resumed)

    runs = Run.objects.filter(task=task)
    inside = runs.filter(scheduled_at__lt=resumed)
    assert inside.count() == 1439
    assert set(inside.values_list("status", "error")) == {("skipped", occurrences.PAUSED_REASON)}
    assert runs.filter(scheduled_at__gte=resumed, status="scheduled").exists()


def test_a_pause_sends_no_missed_notifications(owner, settings) -> None:
    settings.TASKS_MISFIRE_GRACE_SECONDS = 1.0
    channel = ChannelFactory(owner=owner, all_tasks_events=["missed"])
    task = every_ten_seconds(owner, misfire="skip")

    lifecycle.pause_task(task=task, now=T0 + 15 * S)  # 10 s was due: missed by resume
    lifecycle.resume_task(task=task, now=T0 + 25 * S)

    runs = history(task)
    assert (runs[10][0], runs[20]) == ("skipped", ("skipped", occurrences.PAUSED_REASON))
    sent = Notification.objects.filter(channel=channel)
    assert [(n.event, n.run.scheduled_at) for n in sent] == [("missed", T0 + 10 * S)]


def test_a_one_time_task_still_runs_after_its_time_passed_in_a_pause(owner) -> None:
    data = {
        "kind": "handler",
        "payload": {"name": "noop", "args": {}},
        "schedule": schedules.normalize({"type": "once", "delay": 10}, now=T0),
    }
    task = creation.create_task(owner=owner, data=data, now=T0)[0]

    lifecycle.pause_task(task=task, now=T0 + 5 * S)
    lifecycle.resume_task(task=task, now=T0 + 25 * S)

    assert history(task) == {10: ("scheduled", "")}
