"""`skipped` for every occurrence recorded skipped (misfire at planning or at claim, overlap,
pause, skip-next), with its reason, and scheduler_runs_skipped_total counting them by reason."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from notifications.messages import build_message
from notifications.models import Notification
from tasks import events, schedules
from tasks.models import Run, RunCounter
from tasks.transitions import claim, lifecycle, overlap, plan
from tests.notifications.conftest import ChannelFactory, due_run, subscribed_task
from tests.tasks.support import running_run

pytestmark = pytest.mark.django_db


def skipped_counts() -> dict[str, int]:
    counts: dict[str, int] = {}
    for reason, value in RunCounter.objects.filter(metric="skipped").values_list(
        "outcome", "value"
    ):
        counts[reason] = counts.get(reason, 0) + value
    return counts


def reasons_notified() -> list[str]:
    rows = Notification.objects.filter(event="skipped").select_related("run", "task", "channel")
    return sorted(
        build_message(row, attempt=None, public_url="http://x").body["expectation"]["reason"]
        for row in rows
    )


def test_misfire_at_planning_and_pause_each_raise_skipped(user) -> None:
    channel = ChannelFactory(owner=user)
    now = timezone.now().replace(microsecond=0)
    start = now - timedelta(minutes=10)
    schedule = schedules.normalize(
        {"type": "interval", "every": 60, "misfire": "skip", "start_at": start.isoformat()},
        now=start,
    )
    task = subscribed_task(
        channel, ["skipped"], schedule=schedule, schedule_type="interval", next_unplanned_at=start
    )

    plan.plan_task(task, now=now, horizon=now + timedelta(seconds=30))

    skipped = Run.objects.filter(task=task, status="skipped").count()
    assert skipped > 0
    assert not Notification.objects.exclude(event="skipped").exists()  # `missed` not asked for
    assert reasons_notified() == ["misfire"] * skipped
    assert skipped_counts() == {"misfire": skipped}

    lifecycle.pause_task(task=task, now=now)
    lifecycle.resume_task(task=task, now=now + timedelta(seconds=150))

    paused = Run.objects.filter(task=task, status="skipped", error__startswith="paused:").count()
    misfired = Run.objects.filter(task=task, status="skipped", error__startswith="missed:")
    assert paused >= 1
    assert skipped_counts() == {"misfire": misfired.count(), "pause": paused}
    assert reasons_notified().count("pause") == paused


def test_overlap_and_claim_time_misfire_raise_skipped(user) -> None:
    channel = ChannelFactory(owner=user)
    once = {"type": "once", "run_at": "2030-01-01T00:00:00Z", "overlap": "skip"}
    busy = subscribed_task(channel, ["skipped", "missed"], schedule=once)
    running_run(busy, scheduled_at=timezone.now() - timedelta(minutes=1), worker="w-other")
    overlapping = due_run(busy)
    claimed = claim.claim_runs(worker="w", limit=5, prefetch_seconds=0, owner_cap=0)
    assert overlap.resolve_overlaps(worker="w", claimed=claimed) == []

    every = {"type": "interval", "every": 60, "misfire": "skip"}
    late_task = subscribed_task(channel, ["skipped"], schedule=every, schedule_type="interval")
    late = timezone.now() - timedelta(minutes=5)
    missed = due_run(late_task, scheduled_at=late, missed_after=late + timedelta(seconds=60))
    assert claim.claim_runs(worker="w", limit=5, prefetch_seconds=0, owner_cap=0) == []

    assert Run.objects.get(pk=missed.pk).status == "skipped"
    assert sorted(Notification.objects.values_list("run_id", "event")) == sorted(
        [(overlapping.id, "missed"), (overlapping.id, "skipped"), (missed.id, "skipped")]
    )
    assert reasons_notified() == ["misfire", "overlap"]
    assert skipped_counts() == {"misfire": 1, "overlap": 1}


def test_skip_next_raises_skipped_on_request(user) -> None:
    channel = ChannelFactory(owner=user)
    now = timezone.now()
    every = schedules.normalize({"type": "interval", "every": 3600}, now=now)
    task = subscribed_task(
        channel,
        ["skipped"],
        schedule=every,
        schedule_type="interval",
        next_unplanned_at=now + timedelta(hours=1),
    )

    run = lifecycle.skip_next(task=task, now=now)

    assert Notification.objects.get().run_id == run.id
    assert reasons_notified() == ["request"]
    assert skipped_counts() == {"request": 1}


@pytest.mark.django_db
def test_the_check_constraint_admits_exactly_the_skip_kinds() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint"
            " WHERE conname = 'run_skip_kind_valid'"
        )
        [definition] = cursor.fetchone()
    assert tuple(re.findall(r"'([^']*)'::", definition)) == ("", *events.SKIP_KINDS)
