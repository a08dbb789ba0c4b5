"""In headless Chromium: a user narrows the run list by a typed time range, cancels every
unfinished run it matches from the list's link, is told how many first, and exactly those end
cancelled."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tasks.models import Run
from tests.factories import RunFactory, TaskFactory, UserFactory

pytestmark = pytest.mark.processes


def test_a_user_cancels_the_unfinished_runs_of_a_typed_range(site, page) -> None:
    alice = UserFactory(username="alice")
    task = TaskFactory(owner=alice, name="hourly import")
    start = timezone.now().replace(microsecond=0) + timedelta(days=1)
    runs = [RunFactory(task=task, scheduled_at=start + timedelta(hours=h)) for h in range(4)]
    theirs = RunFactory(scheduled_at=start + timedelta(hours=1))  # another user's, in the range
    page.goto(f"{site}/admin/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "password-123")
    page.click("input[type=submit]")
    page.wait_for_selector("#content")

    page.goto(f"{site}/admin/tasks/run/")
    form = page.locator("#scheduled_at-range")
    form.locator("input[name=scheduled_at__gte]").fill(
        f"{start + timedelta(hours=1):%Y-%m-%d %H:%M}"
    )
    form.locator("input[name=scheduled_at__lt]").fill(
        f"{start + timedelta(hours=3):%Y-%m-%d %H:%M}"
    )
    form.locator("input[type=submit]").click()
    page.wait_for_url("**scheduled_at__gte=*")
    assert page.locator("#result_list tbody tr").count() == 2

    page.click("#cancel-matching")
    assert "Cancel 2 unfinished runs matching this filter" in page.inner_text("#bulk-count")
    page.click("#bulk-confirm")
    page.wait_for_selector(".messagelist")

    assert "Cancelled 2 unfinished runs." in page.inner_text(".messagelist")
    assert "scheduled_at__gte=" in page.url  # back on the same filtered list
    statuses = [Run.objects.get(pk=run.pk).status for run in [*runs, theirs]]
    assert statuses == ["scheduled", "cancelled", "cancelled", "scheduled", "scheduled"]
