"""A staff user schedules from the admin in headless Chromium: adds a cron task, sees its next
fire times, a real worker process runs it, and the run list shows seconds.

Each page is saved as a screenshot under SCHEDULER_SCREENSHOT_DIR (default: the test's
temporary folder) for a person to look at.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tasks.models import Run, Task
from tests.conftest import process_env, wait_for
from tests.factories import UserFactory

pytestmark = pytest.mark.processes

SECONDS = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")


@pytest.fixture
def shots(tmp_path) -> Path:
    folder = Path(os.environ.get("SCHEDULER_SCREENSHOT_DIR") or tmp_path / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_staff_adds_a_cron_task_and_watches_it_run(site, page, processes, shots) -> None:
    UserFactory(username="operator", is_staff=True, is_superuser=True)
    processes.start("runworker", "--concurrency", "1", env=process_env())

    page.goto(f"{site}/admin/login/")
    page.fill("#id_username", "operator")
    page.fill("#id_password", "password-123")
    page.click("input[type=submit]")
    page.wait_for_selector("#content")
    page.screenshot(path=shots / "1-index.png", full_page=True)
    assert page.locator("a", has_text="Processes").count() >= 1
    assert "Processs" not in page.content()

    page.goto(f"{site}/admin/tasks/task/add/")
    page.fill("#id_name", "every two seconds")
    page.select_option("#id_kind", "handler")
    page.fill("#id_payload", '{"name": "echo", "args": {"from": "admin"}}')
    page.select_option("#id_schedule_type", "cron")
    assert page.locator(".field-every").is_hidden(), "only the cron fields show"
    page.fill("#id_expression", "*/2 * * * * *")
    page.select_option("#id_timezone", "Europe/Berlin")
    page.fill("#id_max_attempts", "2")
    page.screenshot(path=shots / "2-task-add.png", full_page=True)
    page.click("input[name=_continue]")
    page.wait_for_selector(".next-fire-times li")
    page.screenshot(path=shots / "3-task-change.png", full_page=True)

    fire_times = page.locator(".next-fire-times li").all_inner_texts()
    assert len(fire_times) == 5, fire_times
    assert all(SECONDS.match(text) and text.endswith("Europe/Berlin)") for text in fire_times)
    task = Task.objects.get(name="every two seconds")

    def succeeded() -> bool:
        return Run.objects.filter(task=task, status="succeeded").exists()

    wait_for(succeeded, timeout=60, interval=0.3, details=processes.logs)
    page.goto(f"{site}/admin/tasks/run/?task__id__exact={task.pk}&status__exact=succeeded")
    page.screenshot(path=shots / "4-run-list.png", full_page=True)
    cells = page.locator("#result_list td.field-started").all_inner_texts()
    # To the second, in the viewer's zone (UTC until they pick one), the zone shown.
    assert cells and all(re.fullmatch(SECONDS.pattern + " UTC", c.strip()) for c in cells), cells

    page.locator("#result_list th.field-id a").first.click()
    page.wait_for_selector(".field-output_text")
    page.screenshot(path=shots / "5-run.png", full_page=True)
    assert '{"from": "admin"}' in page.locator(".field-output_text").inner_text()
    assert page.locator("#attempts-group").count() == 1

    page.goto(f"{site}/admin/tasks/task/")
    page.check(f"input[name=_selected_action][value='{task.pk}']")
    page.select_option("select[name=action]", "pause")
    page.click("button[name=index]")
    page.wait_for_selector(".messagelist")
    page.screenshot(path=shots / "6-task-list-paused.png", full_page=True)
    task.refresh_from_db()
    assert task.status == "paused"
