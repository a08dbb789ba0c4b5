"""/metrics: scheduler_runs_skipped_total{reason}, scheduler_alerts_total{event} and the gauge
of tasks by health, from the counters the skipping and alerting transactions write."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test import override_settings

from tasks import expectations
from tasks.models import TaskHealth
from tasks.transitions import lifecycle
from tasks.transitions.expectations import review_expectations
from tests.factories import RunFactory, TaskFactory
from tests.scheduler_project.web.test_metrics import scrape, value

pytestmark = pytest.mark.django_db


@override_settings(SCHEDULER_METRICS_TOKEN="")
def test_skips_alerts_and_health_are_exported(client) -> None:
    now = datetime.now(UTC)
    late = TaskFactory(expect={"start_within": 1}, schedule_type="interval")
    failing = TaskFactory(expect={"failure_streak": 1})
    ended = TaskFactory(expect={"failure_streak": 1}, status="cancelled")  # not counted
    expectations.sync([late, failing, ended], now=now - timedelta(minutes=1))
    TaskHealth.objects.filter(task=failing).update(health="failing")
    RunFactory(task=late, scheduled_at=now - timedelta(seconds=5))
    review_expectations()
    skipping = TaskFactory(
        schedule={"type": "interval", "every": 3600, "start_at": now.isoformat()},
        schedule_type="interval",
        next_unplanned_at=now + timedelta(hours=1),
    )
    lifecycle.skip_next(task=skipping, now=now)

    text = scrape(client)

    assert value(text, "scheduler_runs_skipped_total", reason="request") == 1
    assert value(text, "scheduler_runs_skipped_total", reason="misfire") == 0
    assert value(text, "scheduler_alerts_total", event="late") == 1
    assert value(text, "scheduler_alerts_total", event="failing") == 0
    assert value(text, "scheduler_tasks_health", health="late") == 1
    assert value(text, "scheduler_tasks_health", health="failing") == 1
    assert value(text, "scheduler_tasks_health", health="up") == 0
    # The new counters are not mistaken for attempts.
    assert value(text, "scheduler_run_attempts_total", kind="handler", outcome="request") is None
