"""A cron-scheduled workflow with three real scheduler processes and a worker: exactly one
workflow run per occurrence (none missing, none twice), each with one run per step, none
started before its occurrence; then a cancel of a workflow run in flight stops its pending
steps and its running one, while the others end `succeeded`."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest

import tests.handlers  # noqa: F401 (the API validates step bodies against these handlers)
from tasks.db import db_now
from tasks.models import Process, Run, Workflow, WorkflowRun, WorkflowStep
from tests.conftest import client_for, process_env, wait_for
from tests.factories import UserFactory

pytestmark = pytest.mark.processes

WINDOW = 8.0  # seconds of every-second occurrences


def step_body(name: str, sleep: float) -> dict:
    return {"kind": "handler", "payload": {"name": "step", "args": {"name": name, "sleep": sleep}}}


# `a` outlasts the second between occurrences, so runs overlap (the default `allow`) and the
# last one is still in flight, `b` held behind `a`, when it is cancelled.
STEPS = [
    {"id": "a", "task": step_body("a", 1.5)},
    {"id": "b", "after": ["a"], "task": step_body("b", 0.0)},
]
EVERY_SECOND = {"type": "cron", "expression": "* * * * * *", "allow_every_second": True}


def test_three_schedulers_start_one_workflow_run_per_occurrence(processes) -> None:
    env = process_env(SCHEDULER_HANDLER_MODULES="tests.handlers")
    for _ in range(3):
        processes.start("runscheduler", env=env)
    processes.start("runworker", "--concurrency", "6", env=env)
    wait_for(lambda: Process.objects.filter(stopped_at=None).count() == 4, timeout=60)

    api = client_for(UserFactory())
    created = api.post(
        "/api/v1/workflows",
        {"name": "every-second", "steps": STEPS, "schedule": EVERY_SECOND},
        format="json",
    )
    assert created.status_code == 201, created.content
    workflow_id = created.json()["id"]
    runs = WorkflowRun.objects.filter(workflow_id=workflow_id)
    wait_for(lambda: runs.count() >= WINDOW, timeout=WINDOW + 30, details=processes.logs)
    # Stop the schedule; a pass already under way may start one more occurrence.
    stopped = api.patch(f"/api/v1/workflows/{workflow_id}", {"schedule": None}, format="json")
    assert stopped.status_code == 200, stopped.content
    assert Workflow.objects.get(pk=workflow_id).next_run_at is None

    # Cancel the newest workflow run while its `a` is in flight and its `b` is held.
    newest = runs.order_by("-scheduled_at").first()
    assert newest is not None and newest.status == "running"
    cancelled = api.post(f"/api/v1/workflow-runs/{newest.pk}/cancel")
    assert cancelled.status_code == 200, cancelled.content
    assert cancelled.json()["status"] == "cancelled"
    wait_for(
        lambda: not runs.filter(status="running").exists(),
        timeout=60,
        interval=0.2,
        details=processes.logs,
    )

    started = list(runs.order_by("scheduled_at"))
    times = [run.scheduled_at for run in started]
    # One workflow run per occurrence: consecutive seconds, none missing, none twice.
    seconds = [int((at - times[0]).total_seconds()) for at in times]
    assert seconds == list(range(len(times))), seconds
    assert all(at.microsecond == 0 for at in times)
    assert len(started) >= WINDOW
    assert all(run.started_at >= run.scheduled_at for run in started)
    statuses = Counter(run.status for run in started)
    assert statuses == {"succeeded": len(started) - 1, "cancelled": 1}, statuses

    # Each workflow run has one run per step; a ran before b in every succeeded one.
    steps = WorkflowStep.objects.filter(workflow_run__in=started).select_related("run")
    per_run = Counter(step.workflow_run_id for step in steps)
    assert set(per_run.values()) == {2}
    by_run: dict[object, dict[str, Run]] = {}
    for step in steps:
        assert step.run is not None
        by_run.setdefault(step.workflow_run_id, {})[step.step_id] = step.run
    for run in started:
        a, b = by_run[run.pk]["a"], by_run[run.pk]["b"]
        if run.status == "succeeded":
            assert a.finished_at is not None and b.started_at is not None
            assert b.started_at >= a.finished_at
        else:
            # The cancel stopped the running step and cancelled the held one: b never ran.
            assert (a.status, b.status, b.started_at) == ("cancelled", "cancelled", None)

    # The schedule stopped: no occurrence started after the PATCH's pass.
    later = db_now() + timedelta(seconds=2)
    wait_for(lambda: db_now() > later, timeout=10)
    assert runs.count() == len(started)
    planners = {
        log.name: log.read_text().count("workflow runs started=")
        for log in sorted(processes.logdir.glob("runscheduler-*.log"))
    }
    late = sorted((run.started_at - run.scheduled_at).total_seconds() for run in started)
    print(
        f"\nworkflow runs started per scheduler (passes): {planners}; start lateness (s): "
        f"median {late[len(late) // 2]:.3f}, max {late[-1]:.3f}"
    )
