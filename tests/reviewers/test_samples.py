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
