"""`schedctl workflows` and `schedctl workflow-runs` as a subprocess against a real gunicorn on
127.0.0.1: list, show and start workflows; show, cancel and retry workflow runs; tables with
whole ids, --json the API's answers, another user's workflow an error."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from tasks.models import Run, WorkflowRun, WorkflowStep
from tests.conftest import client_for
from tests.factories import UserFactory
from tests.gunicorn_server import gunicorn  # noqa: F401  (a fixture, used by name)
from tests.system.test_schedctl_processes import served  # noqa: F401  (the fixture)

pytestmark = pytest.mark.processes

NOOP = {"kind": "handler", "payload": {"name": "noop"}}
STEPS = [
    {"id": "extract", "task": NOOP},
    {"id": "load", "after": ["extract"], "task": NOOP},
    {"id": "alert", "after": ["extract"], "on": "failure", "task": NOOP},
]


def created(username: str = "ops") -> str:
    owner = get_user_model().objects.get(username=username)
    response = client_for(owner).post(
        "/api/v1/workflows", {"name": "nightly-etl", "steps": STEPS}, format="json"
    )
    assert response.status_code == 201, response.content
    return response.json()["id"]


def test_workflows_ls_get_and_run(served) -> None:  # noqa: F811
    _, schedctl = served
    workflow_id = created()

    listed = schedctl("workflows", "ls")
    assert listed.returncode == 0, listed.stderr
    assert workflow_id in listed.stdout and "nightly-etl" in listed.stdout
    [row] = json.loads(schedctl("workflows", "ls", "--json").stdout)
    assert (row["id"], [s["id"] for s in row["steps"]]) == (
        workflow_id,
        ["extract", "load", "alert"],
    )

    shown = schedctl("workflows", "get", workflow_id)
    assert shown.returncode == 0, shown.stderr
    lines = {line.split()[0]: line.split()[1:] for line in shown.stdout.splitlines()[1:] if line}
    assert lines["load"] == ["extract", "success", "handler"]
    assert lines["alert"] == ["extract", "failure", "handler"]

    started = schedctl("workflows", "run", workflow_id, "--json")
    assert started.returncode == 0, started.stderr
    answer = json.loads(started.stdout)
    workflow_run = WorkflowRun.objects.get(pk=answer["id"])
    assert (str(workflow_run.workflow_id), answer["status"]) == (workflow_id, "running")
    runs = dict(
        WorkflowStep.objects.filter(workflow_run=workflow_run).values_list("step_id", "run_id")
    )
    assert {s["id"]: s["run"] for s in answer["steps"]} == {k: str(v) for k, v in runs.items()}

    again = schedctl("workflows", "run", workflow_id)
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("started: ") and " running" in again.stdout.splitlines()[0]
    assert WorkflowRun.objects.filter(workflow_id=workflow_id).count() == 2
    latest = schedctl("workflows", "get", workflow_id)
    assert str(workflow_run.pk) in latest.stdout  # among its latest runs


def test_workflow_runs_get_retry_and_cancel(served) -> None:  # noqa: F811
    _, schedctl = served
    workflow_id = created()
    workflow_run_id = json.loads(schedctl("workflows", "run", workflow_id, "--json").stdout)["id"]
    extract = WorkflowStep.objects.get(workflow_run_id=workflow_run_id, step_id="extract").run_id
    now = timezone.now()
    Run.objects.filter(pk=extract).update(
        status="failed", started_at=now, finished_at=now, error="boom"
    )
    # The failure step `alert` is released, and fails too: the workflow run fails.
    alert = WorkflowStep.objects.get(workflow_run_id=workflow_run_id, step_id="alert").run_id
    assert Run.objects.get(pk=alert).status == "scheduled"
    Run.objects.filter(pk=alert).update(status="failed", started_at=now, finished_at=now)
    assert WorkflowRun.objects.get(pk=workflow_run_id).status == "failed"

    shown = schedctl("workflow-runs", "get", workflow_run_id)
    assert shown.returncode == 0, shown.stderr
    assert f"workflow run {workflow_run_id}  failed" in shown.stdout
    rows = {line.split()[0]: line.split()[1:] for line in shown.stdout.splitlines()[2:] if line}
    assert rows["extract"] == ["failed", str(extract)]
    assert rows["load"][:2] == [
        "skipped",
        str(WorkflowStep.objects.get(workflow_run_id=workflow_run_id, step_id="load").run_id),
    ]
    assert "skipped: runs on success" in shown.stdout
    got = json.loads(schedctl("workflow-runs", "get", workflow_run_id, "--json").stdout)
    assert {s["id"]: s["status"] for s in got["steps"]} == {
        "extract": "failed",
        "load": "skipped",
        "alert": "failed",
    }

    retried = schedctl("workflow-runs", "retry", workflow_run_id)
    assert retried.returncode == 0, retried.stderr
    assert retried.stdout.startswith(f"retried: {workflow_run_id} running")
    assert WorkflowRun.objects.get(pk=workflow_run_id).status == "running"
    assert Run.objects.get(pk=extract).status == "scheduled"

    cancelled = schedctl("workflow-runs", "cancel", workflow_run_id, "--json")
    assert cancelled.returncode == 0, cancelled.stderr
    assert json.loads(cancelled.stdout)["status"] == "cancelled"
    assert WorkflowRun.objects.get(pk=workflow_run_id).status == "cancelled"
    assert Run.objects.get(pk=extract).status == "cancelled"

    again = schedctl("workflow-runs", "retry", workflow_run_id, "--json")
    assert again.returncode == 0, again.stderr  # a cancelled one may be retried
    assert json.loads(again.stdout)["status"] == "running"
    refused = schedctl("workflow-runs", "retry", workflow_run_id)  # a running one may not
    assert refused.returncode == 1 and "HTTP 409" in refused.stderr


def test_another_users_workflow_is_an_error(served) -> None:  # noqa: F811
    _, schedctl = served
    UserFactory(username="someone")
    theirs = created("someone")
    for args in (("workflows", "get", theirs), ("workflows", "run", theirs)):
        answer = schedctl(*args)
        assert answer.returncode == 1 and "HTTP 404" in answer.stderr, args
    assert schedctl("workflows", "ls", "--json").stdout.strip() == "[]"


def test_workflows_get_and_ls_show_the_schedule_and_priority(served) -> None:  # noqa: F811
    _, schedctl = served
    owner = get_user_model().objects.get(username="ops")
    daily = {"type": "daily", "at": "04:30", "timezone": "UTC"}
    response = client_for(owner).post(
        "/api/v1/workflows",
        {
            "name": "nightly",
            "steps": STEPS,
            "schedule": daily,
            "priority": 8,
            "expect": {"success_within": 90000},
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    workflow = response.json()

    shown = schedctl("workflows", "get", workflow["id"])
    assert shown.returncode == 0, shown.stderr
    [line] = [line for line in shown.stdout.splitlines() if line.startswith("schedule: ")]
    assert json.loads(line.removeprefix("schedule: "))["at"] == "04:30:00"
    assert "priority: 8" in shown.stdout.splitlines()
    assert "health: ok (a success expected every 90000 s)" in shown.stdout.splitlines()
    assert any(
        line.startswith("next run: ") and "04:30" in line for line in shown.stdout.splitlines()
    )
    listed = schedctl("workflows", "ls", "--tz", "UTC")
    assert listed.returncode == 0, listed.stderr
    [row] = [line for line in listed.stdout.splitlines() if workflow["id"] in line]
    assert "04:30" in row

    plain = created()
    unscheduled = schedctl("workflows", "get", plain)
    assert "schedule: none (started on demand)" in unscheduled.stdout
    assert "priority: 5" in unscheduled.stdout.splitlines()
    assert "health:" not in unscheduled.stdout
