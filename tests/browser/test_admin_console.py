"""The console in headless Chromium at 1,280 px, as a signed-in user (not staff) sees it: the task
list, a failing task's page, its failed run's page and the timeline, each checked from the
page's geometry (nothing cut off, the summary and the error above the fields, overlapping bars)
with a screenshot of each under the test's tmp path for a person to look at."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from accounts.preferences import set_zone
from tasks.models import Attempt
from tests.browser.test_admin_layout import OVERFLOW
from tests.factories import RunFactory, TaskFactory, UserFactory

pytestmark = pytest.mark.processes


@pytest.fixture
def shots(tmp_path) -> Path:
    folder = Path(os.environ.get("SCHEDULER_SCREENSHOT_DIR") or tmp_path / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def box(page, selector: str) -> dict:
    found = page.locator(selector).first.bounding_box()
    assert found is not None, selector
    return found


def test_the_console_pages_read_first_at_1280_px(site, page, shots) -> None:
    alice = UserFactory(username="alice")
    set_zone(user=alice, zone="Europe/Berlin")
    now = timezone.now().replace(microsecond=0)
    task = TaskFactory(
        owner=alice,
        name="nightly warehouse export to the finance team's reporting bucket",
        schedule={"type": "daily", "at": "09:00:00", "timezone": "Europe/Berlin"},
        schedule_type="daily",
        next_unplanned_at=now + timedelta(hours=5),
        concurrency={"key": "warehouse-db", "limit": 2},
        expect={"failure_streak": 3},
    )
    TaskFactory(owner=alice, name="hourly cleanup", status="paused")
    TaskFactory(owner=alice, name="retired job", status="cancelled")
    runs = []
    for i in range(30):
        start = now - timedelta(hours=30 - i)
        status = "failed" if i % 7 == 3 else "succeeded"
        runs.append(
            RunFactory(
                task=task,
                scheduled_at=start,
                status=status,
                attempt=1,
                started_at=start,
                finished_at=start + timedelta(minutes=20 + i),
                error='Traceback (most recent call last):\n  File "export.py", line 12\n'
                "ConnectionError: warehouse-replica-02.example.internal:5432 refused"
                if status == "failed"
                else "",
            )
        )
    failed = runs[-6]  # i = 24: failed
    assert failed.status == "failed"
    Attempt.objects.create(
        run=failed,
        number=1,
        started_at=failed.started_at,
        finished_at=failed.finished_at,
        outcome="failed",
        worker="worker-host-01.example.internal:12345",
        error="ConnectionError: warehouse-replica-02.example.internal:5432 refused",
    )
    # Two runs of one task overlapping in the last hour.
    overlapping = [
        RunFactory(
            task=task,
            scheduled_at=now - timedelta(minutes=m),
            status="succeeded",
            attempt=1,
            started_at=now - timedelta(minutes=m),
            finished_at=now - timedelta(minutes=m - 30),
        )
        for m in (50, 35)
    ]

    page.goto(f"{site}/admin/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "password-123")
    page.click("input[type=submit]")
    page.wait_for_selector("#content")

    cut = {}
    page.goto(f"{site}/admin/tasks/task/")
    page.screenshot(path=shots / "console-task-list.png", full_page=True)
    page.screenshot(path=shots / "console-task-list-top.png")
    cut["task-list"] = page.evaluate(OVERFLOW)
    text = page.inner_text("#result_list")
    assert "retired job" not in text and "hourly cleanup" in text
    assert "At 09:00 every day (Europe/Berlin)" in text
    assert page.locator("#result_list .run-strip .sq.tone-bad").count() >= 1

    page.goto(f"{site}/admin/tasks/task/{task.pk}/change/")
    page.screenshot(path=shots / "console-task.png", full_page=True)
    page.screenshot(path=shots / "console-task-top.png")
    cut["task"] = page.evaluate(OVERFLOW)
    assert box(page, "#task-summary .run-strip")["y"] < box(page, "#id_name")["y"]
    assert page.locator("#task-summary .run-strip .sq").count() == 30
    assert page.locator("#task-summary .run-strip .sq.tone-bad").count() == 4
    assert "warehouse-db" in page.inner_text("#task-summary")

    page.goto(f"{site}/admin/tasks/run/{failed.pk}/change/")
    page.screenshot(path=shots / "console-run.png", full_page=True)
    page.screenshot(path=shots / "console-run-top.png")
    cut["run"] = page.evaluate(OVERFLOW)
    assert box(page, "#run-error")["y"] < box(page, "#fields")["y"]
    assert "ConnectionError" in page.inner_text("#run-error")
    assert page.inner_text("#run-duration") == "44 m 00 s"

    page.goto(f"{site}/admin/tasks/run/timeline/?task={task.pk}&hours=24")
    page.screenshot(path=shots / "console-timeline.png", full_page=True)
    page.screenshot(path=shots / "console-timeline-top.png")
    cut["timeline"] = page.evaluate(OVERFLOW)
    first, second = (box(page, f'rect[data-run="{run.pk}"]') for run in overlapping)
    assert first["x"] < second["x"] < first["x"] + first["width"]
    assert first["y"] != second["y"]

    assert cut == {name: [] for name in cut}
