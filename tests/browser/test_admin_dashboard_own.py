"""A non-operator's dashboard in headless Chromium at 1,280 px: their own counts only, the four
charts side by side with nothing cut off, and a click on a bar opens the run list of exactly the
runs it counts. Screenshots are kept under the test's tmp path (or SCHEDULER_SCREENSHOT_DIR)."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from tasks.models import ConcurrencyKey
from tests.browser.test_admin_layout import OVERFLOW
from tests.factories import RunFactory, TaskFactory, UserFactory

pytestmark = pytest.mark.processes


def test_a_users_dashboard_counts_their_runs_and_a_bar_opens_them(site, page, tmp_path) -> None:
    shots = Path(os.environ.get("SCHEDULER_SCREENSHOT_DIR") or tmp_path / "screenshots")
    shots.mkdir(parents=True, exist_ok=True)
    alice, bob = UserFactory(username="alice"), UserFactory(username="bob")
    mine, theirs = TaskFactory(owner=alice), TaskFactory(owner=bob)
    ConcurrencyKey.objects.create(owner=alice, name="warehouse-db", max_running=2)
    now = timezone.now().replace(second=0, microsecond=0)
    failed = []
    for i in range(40):
        start = now - timedelta(minutes=6 * i + 3)
        status = "failed" if i % 5 == 0 else "succeeded"
        run = RunFactory(
            task=mine,
            status=status,
            scheduled_at=start - timedelta(seconds=i % 9 * 4),
            started_at=start,
            finished_at=start + timedelta(seconds=20),
        )
        if status == "failed" and i < 10:  # the last hour's
            failed.append(str(run.pk))
    for i in range(30):  # bob's failures, none of which alice's dashboard counts
        start = now - timedelta(minutes=2 * i + 1)
        RunFactory(
            task=theirs,
            status="failed",
            scheduled_at=start,
            started_at=start,
            finished_at=start + timedelta(seconds=1),
        )

    page.goto(f"{site}/admin/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "password-123")
    page.click("input[type=submit]")
    page.wait_for_selector("#content")
    page.goto(f"{site}/admin/dashboard/?range=1h")
    page.screenshot(path=shots / "dashboard-own.png", full_page=True)
    page.screenshot(path=shots / "dashboard-own-top.png")

    assert page.evaluate(OVERFLOW) == []
    assert "warehouse-db" in page.locator("#dashboard-keys").inner_text()
    failed_row = page.locator("#dashboard-live tr", has_text="Failed (in range)")
    assert failed_row.locator("td").inner_text() == str(len(failed))
    caption = page.locator("figcaption", has_text="Failures").inner_text()
    assert caption == f"Failures ({len(failed)} runs)"
    bar = page.locator("figure", has_text="Failures").locator("a.bar").first
    bar.click()
    page.wait_for_selector("#result_list")
    ids = page.locator("#result_list td.field-id, #result_list th.field-id").all_inner_texts()
    assert len(ids) == 1 and ids[0] in failed
