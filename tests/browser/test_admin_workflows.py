"""A workflow's page and a workflow run's page at 1,280 px: the DAG is drawn (a box per step),
nothing is cut off, "Run now" starts a workflow run and shows it, and a box on the run page
leads to its step's run; with a screenshot of
each for a person to look at."""

from __future__ import annotations

import pytest
from django.utils import timezone

from tasks.models import Run, WorkflowStep
from tests.browser.test_admin_layout import OVERFLOW, shots  # noqa: F401  (the fixture)
from tests.conftest import client_for
from tests.factories import UserFactory

pytestmark = pytest.mark.processes

NOOP = {"kind": "handler", "payload": {"name": "noop"}}
STEPS = [
    {"id": "extract", "task": NOOP},
    {"id": "clean-orders", "after": ["extract"], "task": NOOP},
    {"id": "clean-customers", "after": ["extract"], "task": NOOP},
    {"id": "clean-products", "after": ["extract"], "task": NOOP},
    {"id": "load", "after": ["clean-orders", "clean-customers", "clean-products"], "task": NOOP},
    {"id": "page-on-call", "after": ["load"], "on": "failure", "task": NOOP},
    {"id": "report", "after": ["load"], "task": NOOP},
    {"id": "cleanup", "after": ["report", "page-on-call"], "on": "always", "task": NOOP},
]
# The DAG fits its frame at 1,280 px rather than hiding its last steps behind a scroll bar.
FRAME_SCROLLS = """() => [...document.querySelectorAll('.dag-frame')]
  .filter(frame => frame.scrollWidth > frame.clientWidth + 1).map(() => 'the DAG scrolls')"""
ENDED = {"extract": "succeeded", "clean-orders": "succeeded", "clean-customers": "failed"}


def test_the_workflow_pages_at_1280_px(site, page, shots) -> None:  # noqa: F811
    operator = UserFactory(username="operator", is_staff=True, is_superuser=True)
    api = client_for(operator)
    workflow = api.post("/api/v1/workflows", {"name": "nightly", "steps": STEPS}, format="json")
    workflow_id = workflow.json()["id"]
    workflow_run = api.post(f"/api/v1/workflows/{workflow_id}/run").json()["id"]
    now = timezone.now()
    for step_id, status in ENDED.items():
        run = WorkflowStep.objects.get(workflow_run_id=workflow_run, step_id=step_id).run_id
        Run.objects.filter(pk=run).update(status=status, started_at=now, finished_at=now)

    page.goto(f"{site}/admin/login/")
    page.fill("#id_username", "operator")
    page.fill("#id_password", "password-123")
    page.click("input[type=submit]")
    page.wait_for_selector("#content")
    pages = {
        "workflow-list": "/admin/tasks/workflow/",
        "workflow": f"/admin/tasks/workflow/{workflow_id}/change/",
        "workflow-run": f"/admin/tasks/workflowrun/{workflow_run}/change/",
    }
    cut = {}
    for name, path in pages.items():
        page.goto(site + path)
        page.wait_for_selector("#content")
        page.screenshot(path=shots / f"1280-{name}.png", full_page=True)
        cut[name] = page.evaluate(OVERFLOW) + page.evaluate(FRAME_SCROLLS)
        if name != "workflow-list":
            assert page.locator("svg.dag g.step").count() == len(STEPS)
            box = page.locator("svg.dag g.step[data-step=extract] rect").bounding_box()
            assert box and box["width"] > 100  # drawn, not collapsed
    assert cut == {name: [] for name in pages}

    page.goto(site + pages["workflow"])
    page.click("#workflow-run-now")
    page.wait_for_selector("svg.dag")
    assert "/admin/tasks/workflowrun/" in page.url and workflow_run not in page.url
    assert page.locator("svg.dag g.step").count() == len(STEPS)

    page.goto(site + pages["workflow-run"])
    page.click("svg.dag g.step[data-step=clean-customers]")
    page.wait_for_selector("#content")
    assert "/admin/tasks/run/" in page.url
    assert "nightly/clean-customers" in page.content()
