"""The admin at 1,280 px: no column of the task and run lists, nor anything on the task page, the
run page and the dashboard, is cut off or pushed past the window (checked from element geometry),
with a screenshot of each page for a person to look at."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.utils import timezone

from tests.factories import RunFactory, TaskFactory, UserFactory

pytestmark = pytest.mark.processes

# Everything the page lays out that ends right of the window, or a table wider than its box.
OVERFLOW = """() => {
  const width = document.documentElement.clientWidth;
  const out = [];
  for (const el of document.querySelectorAll('#content *')) {
    const box = el.getBoundingClientRect();
    if (box.width > 0 && box.right > width + 1) out.push(el.tagName + '.' + el.className);
  }
  for (const box of document.querySelectorAll('#changelist .results, .tabular')) {
    if (box.scrollWidth > box.clientWidth + 1) out.push('scrolls: ' + box.className);
  }
  if (document.documentElement.scrollWidth > width + 1) out.push('the page scrolls sideways');
  return out;
}"""


@pytest.fixture
def shots(tmp_path) -> Path:
    folder = Path(os.environ.get("SCHEDULER_SCREENSHOT_DIR") or tmp_path / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_no_column_is_cut_off_at_1280_px(site, page, shots) -> None:
    operator = UserFactory(username="operator", is_staff=True, is_superuser=True)
    task = TaskFactory(
        owner=operator,
        name="nightly warehouse export to the finance team's reporting bucket",
        schedule={"type": "cron", "expression": "0 3 * * *", "timezone": "Europe/Berlin"},
        schedule_type="cron",
    )
    run = RunFactory(
        task=task,
        status="failed",
        finished_at=timezone.now(),
        started_at=timezone.now(),
        worker="worker-host-01.example.internal:12345",
        error="connection refused by warehouse-replica-02.example.internal:5432 " * 3,
    )
    page.goto(f"{site}/admin/login/")
    page.fill("#id_username", "operator")
    page.fill("#id_password", "password-123")
    page.click("input[type=submit]")
    page.wait_for_selector("#content")

    pages = {
        "task-list": "/admin/tasks/task/",
        "task": f"/admin/tasks/task/{task.pk}/change/",
        "run-list": "/admin/tasks/run/",
        "run": f"/admin/tasks/run/{run.pk}/change/",
        "dashboard": "/admin/dashboard/",
    }
    cut = {}
    for name, path in pages.items():
        page.goto(site + path)
        page.wait_for_selector("#content")
        page.screenshot(path=shots / f"1280-{name}.png", full_page=True)
        cut[name] = page.evaluate(OVERFLOW)
    assert page.viewport_size == {"width": 1280, "height": 900}
    assert cut == {name: [] for name in pages}
