"""Per-minute queue samples for the dashboard: one row per minute, whoever writes it."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from reviewers.samples import record_queue_sample
from tasks.db import db_now
from tasks.models import QueueSample
from tests.factories import RunFactory


def test_samples_the_minute_just_ended_once(db):
    now = db_now()
    minute = now.replace(second=0, microsecond=0) - timedelta(minutes=1)
    if now.second >= 58:  # do not straddle a minute boundary
        return
    RunFactory(execute_at=now - timedelta(seconds=5))
    RunFactory(status="running", worker="w", started_at=now, heartbeat_at=now)
    at = minute + timedelta(seconds=30)
    RunFactory(
        status="succeeded", execute_at=at - timedelta(seconds=2), started_at=at, finished_at=at
    )
    RunFactory(status="failed", execute_at=at, started_at=at, finished_at=at)
    assert record_queue_sample() is True
    assert record_queue_sample() is False  # already written (by this or another reviewer)
    sample = QueueSample.objects.get()
    assert sample.minute == minute
    assert (sample.due, sample.running, sample.finished, sample.failed) == (1, 1, 2, 1)
    assert sample.lateness_max == 2.0
    assert timezone.is_aware(sample.minute)


def test_backfilled_runs_count_as_finished_but_not_as_late(db):
    now = db_now()
    minute = now.replace(second=0, microsecond=0) - timedelta(minutes=1)
    if now.second >= 58:  # do not straddle a minute boundary
        return
    at = minute + timedelta(seconds=30)
    RunFactory(
        status="succeeded", execute_at=at - timedelta(seconds=3), started_at=at, finished_at=at
    )
    days_ago = at - timedelta(days=9)
    RunFactory(
        status="succeeded",
        scheduled_at=days_ago,
        execute_at=days_ago,
        started_at=at,
        finished_at=at,
        backfill=True,
    )
    assert record_queue_sample() is True
    sample = QueueSample.objects.get()
    assert sample.finished == 2
    assert (sample.lateness_p50, sample.lateness_max) == (3.0, 3.0)
