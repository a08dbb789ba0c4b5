"""The workflow admin: a workflow's page draws its DAG (a box per step, an arrow per `after`,
the `on` condition on its arrow) toned by the last run's step statuses; a workflow run's page
links each box to its step's run and lists the steps; another user's workflow is a 404."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from tasks.admin.display import TONES
from tasks.admin.workflow_dag import layers
from tasks.models import Run, WorkflowRun, WorkflowStep
from tests.conftest import client_for

pytestmark = pytest.mark.django_db

NOOP = {"kind": "handler", "payload": {"name": "noop"}}
DIAMOND = [
    {"id": "a", "task": NOOP},
    {"id": "b", "after": ["a"], "task": NOOP},
    {"id": "c", "after": ["a"], "task": NOOP},
    {"id": "d", "after": ["b", "c"], "task": NOOP},
    {"id": "tidy", "after": ["d"], "on": "always", "task": NOOP},
]


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def started(user) -> WorkflowRun:
    api = client_for(user)
    workflow = api.post("/api/v1/workflows", {"name": "wf", "steps": DIAMOND}, format="json")
    assert workflow.status_code == 201, workflow.content
    response = api.post(f"/api/v1/workflows/{workflow.json()['id']}/run")
    assert response.status_code == 201, response.content
    return WorkflowRun.objects.get(pk=response.json()["id"])


def end(workflow_run: WorkflowRun, step_id: str, status: str) -> None:
    now = timezone.now()
    run = WorkflowStep.objects.get(workflow_run=workflow_run, step_id=step_id).run_id
    Run.objects.filter(pk=run).update(status=status, started_at=now, finished_at=now)


def statuses(workflow_run: WorkflowRun) -> dict[str, str]:
    rows = WorkflowStep.objects.filter(workflow_run=workflow_run)
    return dict(rows.values_list("step_id", "run__status"))


def boxes(html: str) -> dict[str, tuple[str, str]]:
    """Each step box's (tone, status) as the SVG draws it."""
    found = re.findall(r'<g class="step tone-(\w+)" data-step="([^"]+)" data-status="(\w*)"', html)
    return {step: (tone, status) for tone, step, status in found}


def test_layers_are_the_longest_path_from_a_root() -> None:
    steps = [*DIAMOND, {"id": "e", "after": ["a", "tidy"], "task": NOOP}]
    assert layers(steps) == {"a": 0, "b": 1, "c": 1, "d": 2, "tidy": 3, "e": 4}


def test_a_chain_of_1000_steps_is_laid_out() -> None:
    chain = [{"id": "s0", "task": NOOP}]
    chain += [{"id": f"s{i}", "after": [f"s{i - 1}"], "task": NOOP} for i in range(1, 1000)]
    assert layers(chain) == {f"s{i}": i for i in range(1000)}


def test_a_workflow_page_draws_its_dag_toned_by_the_last_run(user) -> None:
    older = started(user)
    latest = WorkflowRun.objects.get(
        pk=client_for(user).post(f"/api/v1/workflows/{older.workflow_id}/run").json()["id"]
    )
    end(latest, "a", "succeeded")
    end(latest, "b", "failed")
    html = (
        signed_in(user)
        .get(reverse("admin:tasks_workflow_change", args=[older.workflow_id]))
        .content.decode()
    )

    shown = statuses(latest)
    assert {"succeeded", "failed"} <= set(shown.values())
    assert boxes(html) == {s: (TONES.get(st, "idle"), st) for s, st in shown.items()}
    edges = set(re.findall(r'class="edge" data-from="(\w+)" data-to="(\w+)"', html))
    assert edges == {("a", "b"), ("a", "c"), ("b", "d"), ("c", "d"), ("d", "tidy")}
    assert re.findall(r'class="edge-label"[^>]*>(\w+)<', html) == ["always"]
    for pk in WorkflowStep.objects.filter(workflow_run=latest).values_list("run_id", flat=True):
        assert f'href="{reverse("admin:tasks_run_change", args=[pk])}"' in html
    assert reverse("admin:tasks_workflowrun_change", args=[older.pk]) in html


def test_a_workflow_never_run_draws_its_steps_as_not_run(user) -> None:
    api = client_for(user)
    created = api.post("/api/v1/workflows", {"name": "wf", "steps": DIAMOND}, format="json")
    url = reverse("admin:tasks_workflow_change", args=[created.json()["id"]])
    html = signed_in(user).get(url).content.decode()
    assert set(boxes(html).values()) == {("none", "")} and len(boxes(html)) == 5
    assert html.count(">not run<") == 5


def test_a_workflow_run_page_links_each_box_and_lists_the_steps(user) -> None:
    workflow_run = started(user)
    end(workflow_run, "a", "succeeded")
    html = (
        signed_in(user)
        .get(reverse("admin:tasks_workflowrun_change", args=[workflow_run.pk]))
        .content.decode()
    )

    shown = statuses(workflow_run)
    assert boxes(html) == {s: (TONES.get(st, "idle"), st) for s, st in shown.items()}
    table = html[html.index('class="workflow-steps"') :]
    for step in WorkflowStep.objects.filter(workflow_run=workflow_run):
        link = reverse("admin:tasks_run_change", args=[step.run_id])
        assert f'<a href="{link}"><g class="step' in html  # the box
        assert f'<a href="{link}">{step.run_id}</a>' in table  # the table's row
    assert len(re.findall(r"<tr><td>", table)) == len(DIAMOND)


def test_the_list_shows_only_the_users_workflows(user, other_user) -> None:
    mine = started(user)
    end(mine, "a", "failed")  # `b` and `c` skipped, so `d`, then `tidy` runs: still running
    theirs = started(other_user)
    WorkflowRun.objects.filter(pk=theirs.pk).update(status="cancelled", finished_at=timezone.now())
    listed = signed_in(user).get(reverse("admin:tasks_workflow_changelist"))
    assert listed.status_code == 200
    row = re.search(r"<tr>.*?</tr>", listed.content.decode().split("<tbody>")[1], re.S)
    assert row and '<span class="badge tone-busy">running</span>' in row.group(0)
    assert "tone-off" not in listed.content.decode()  # not theirs, cancelled
    assert f"/{theirs.workflow_id}/change/" not in listed.content.decode()
    assert reverse("admin:tasks_workflow_change", args=[theirs.workflow_id]) not in (
        listed.content.decode()
    )


def test_another_users_workflow_and_workflow_run_are_404(user, other_user) -> None:
    theirs = started(other_user)
    client = signed_in(user)
    page = reverse("admin:tasks_workflow_change", args=[theirs.workflow_id])
    assert client.get(page).status_code == 404
    run_page = reverse("admin:tasks_workflowrun_change", args=[theirs.pk])
    assert client.get(run_page).status_code == 404
    assert signed_in(other_user).get(run_page).status_code == 200


def test_run_now_starts_a_workflow_run_and_shows_it(user) -> None:
    workflow_id = started(user).workflow_id
    client = signed_in(user)
    page = reverse("admin:tasks_workflow_change", args=[workflow_id])
    assert 'id="workflow-run-now"' in client.get(page).content.decode()
    start = reverse("admin:tasks_workflow_start", args=[workflow_id])
    assert client.get(start).status_code == 405
    assert WorkflowRun.objects.filter(workflow_id=workflow_id).count() == 1

    response = client.post(start)
    newest = WorkflowRun.objects.filter(workflow_id=workflow_id).order_by("-started_at").first()
    assert WorkflowRun.objects.filter(workflow_id=workflow_id).count() == 2
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:tasks_workflowrun_change", args=[newest.pk])
    steps = WorkflowStep.objects.filter(workflow_run=newest)
    assert sorted(steps.values_list("step_id", flat=True)) == sorted(s["id"] for s in DIAMOND)
    assert set(steps.values_list("run__task__owner", flat=True)) == {user.pk}


def test_run_now_on_another_users_workflow_is_404(user, other_user) -> None:
    theirs = started(other_user)
    start = reverse("admin:tasks_workflow_start", args=[theirs.workflow_id])
    assert signed_in(user).post(start).status_code == 404
    assert WorkflowRun.objects.filter(workflow_id=theirs.workflow_id).count() == 1


def test_a_run_page_draws_the_steps_it_started_with_after_a_patch(user) -> None:
    workflow_run = started(user)
    api = client_for(user)
    other = [{"id": "x", "task": NOOP}, {"id": "y", "after": ["x"], "task": NOOP}]
    url = f"/api/v1/workflows/{workflow_run.workflow_id}"
    daily = {"type": "daily", "at": "04:30", "timezone": "UTC"}
    assert api.patch(url, {"steps": other, "schedule": daily}, format="json").status_code == 200
    html = (
        signed_in(user)
        .get(reverse("admin:tasks_workflowrun_change", args=[workflow_run.pk]))
        .content.decode()
    )
    assert set(boxes(html)) == {"a", "b", "c", "d", "tidy"}
    page = signed_in(user).get(
        reverse("admin:tasks_workflow_change", args=[workflow_run.workflow_id])
    )
    shown = page.content.decode()
    assert "04:30" in shown and "started on demand" not in shown
    assert set(boxes(shown)) == {"x", "y"}


def test_a_workflow_page_shows_its_priority_and_health(user) -> None:
    api = client_for(user)
    body = {"name": "wf", "steps": DIAMOND, "priority": 7, "expect": {"success_within": 60}}
    workflow = api.post("/api/v1/workflows", body, format="json").json()
    html = (
        signed_in(user)
        .get(reverse("admin:tasks_workflow_change", args=[workflow["id"]]))
        .content.decode()
    )
    assert re.search(r"Priority:</label>\s*<div class=\"readonly\">7</div>", html), html
    assert re.search(r"Health:</label>\s*<div class=\"readonly\">ok</div>", html), html
