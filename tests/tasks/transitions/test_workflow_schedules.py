"""The scheduler's pass over workflow schedules in-process: one workflow run per due occurrence
(once, however often the pass is replayed), the misfire policy and the exclusions as a task's,
the overlap policies, and max_runs."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from rest_framework.test import APIClient

from tasks import schedules
from tasks.api.workflows import step_bodies
from tasks.db import db_now
from tasks.management.commands.runscheduler import MIN_PAUSE_SECONDS
from tasks.management.commands.runscheduler import Command as Scheduler
from tasks.models import Run, Workflow, WorkflowRun, WorkflowStep
from tasks.occurrences import MISSED_REASON
from tasks.transitions.workflow_schedules import (
    OVERLAP_SKIPPED,
    RETRY_SECONDS,
    start_due_workflows,
)

NOOP = {"kind": "handler", "payload": {"name": "noop"}}
TWO = [{"id": "a", "task": NOOP}, {"id": "b", "after": ["a"], "task": NOOP}]


def iso(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


def scheduled(api: APIClient, **schedule: object) -> tuple[Workflow, datetime]:
    """A workflow every 60 s from an hour ahead (beyond any pass of this test's own making)."""
    start = db_now().replace(microsecond=0) + timedelta(hours=1)
    body = {"type": "interval", "every": 60, "start_at": iso(start), **schedule}
    created = api.post(
        "/api/v1/workflows", {"name": "wf", "steps": TWO, "schedule": body}, format="json"
    )
    assert created.status_code == 201, created.content
    workflow = Workflow.objects.get(pk=created.json()["id"])
    assert workflow.next_run_at == start
    return workflow, start


def plan(at: datetime) -> tuple[int, int]:
    result = start_due_workflows(now=at, step_bodies=step_bodies)
    return result.started, result.skipped


def runs_of(workflow: Workflow) -> list[WorkflowRun]:
    return list(workflow.runs.order_by("scheduled_at"))


@pytest.mark.django_db
def test_a_due_occurrence_starts_one_workflow_run_once(api) -> None:
    workflow, start = scheduled(api)
    assert plan(start - timedelta(seconds=1)) == (0, 0)  # not due yet
    assert plan(start) == (1, 0)
    [workflow_run] = runs_of(workflow)
    assert (workflow_run.scheduled_at, workflow_run.status) == (start, "running")
    steps = WorkflowStep.objects.filter(workflow_run=workflow_run).select_related("run")
    assert {s.step_id: s.run.status for s in steps if s.run} == {
        "a": Run.Status.SCHEDULED,
        "b": Run.Status.WAITING_FOR_RESOURCE,
    }
    workflow.refresh_from_db()
    assert (workflow.next_run_at, workflow.runs_started) == (start + timedelta(seconds=60), 1)
    assert plan(start) == (0, 0)  # replayed at the same instant: nothing more

    # next_run_at set back on an occurrence already started (a replayed pass, a PATCH): the
    # unique (workflow, scheduled_at) index starts it once, and the pass goes on.
    Workflow.objects.filter(pk=workflow.pk).update(next_run_at=start)
    assert plan(start + timedelta(seconds=60)) == (1, 0)
    assert [r.scheduled_at for r in runs_of(workflow)] == [start, start + timedelta(seconds=60)]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("misfire", "started_at_offsets"),
    [("skip", [600]), ("run_once", [540, 600]), ("run_all", list(range(0, 601, 60)))],
)
def test_missed_occurrences_follow_the_misfire_policy(api, misfire, started_at_offsets) -> None:
    workflow, start = scheduled(api, misfire=misfire, misfire_grace=30)
    # The schedulers were down for ten minutes: eleven occurrences are due at once.
    assert plan(start + timedelta(seconds=600)) == (
        len(started_at_offsets),
        11 - len(started_at_offsets),
    )
    runs = runs_of(workflow)
    assert len(runs) == 11
    started = [int((r.scheduled_at - start).total_seconds()) for r in runs if r.status == "running"]
    assert started == started_at_offsets
    skipped = [r for r in runs if r.status == "skipped"]
    assert {(r.reason, r.finished_at is not None) for r in skipped} <= {(MISSED_REASON, True)}
    assert not WorkflowStep.objects.filter(workflow_run__in=skipped).exists()


@pytest.mark.django_db
def test_overlap_skip_records_the_occurrence_skipped_while_one_runs(api) -> None:
    workflow, start = scheduled(api, overlap="skip")
    assert plan(start) == (1, 0)
    assert plan(start + timedelta(seconds=60)) == (0, 1)
    first, second = runs_of(workflow)
    assert (first.status, second.status, second.reason) == ("running", "skipped", OVERLAP_SKIPPED)
    response = api.get(f"/api/v1/workflow-runs/{second.pk}").json()
    assert (response["status"], response["reason"], response["steps"]) == (
        "skipped",
        OVERLAP_SKIPPED,
        [],
    )
    api.post(f"/api/v1/workflow-runs/{first.pk}/cancel")
    assert plan(start + timedelta(seconds=120)) == (1, 0)  # none running: it starts


@pytest.mark.django_db
def test_overlap_cancel_previous_cancels_the_one_running(api) -> None:
    workflow, start = scheduled(api, overlap="cancel_previous")
    assert plan(start) == (1, 0)
    assert plan(start + timedelta(seconds=60)) == (1, 0)
    first, second = runs_of(workflow)
    first.refresh_from_db()
    assert (first.status, second.status) == ("cancelled", "running")
    cancelled = Run.objects.filter(workflow_step__workflow_run=first)
    assert set(cancelled.values_list("status", flat=True)) == {"cancelled"}


@pytest.mark.django_db
def test_overlap_allow_lets_them_run_together(api) -> None:
    workflow, start = scheduled(api)
    assert plan(start) == (1, 0)
    assert plan(start + timedelta(seconds=60)) == (1, 0)
    assert [r.status for r in runs_of(workflow)] == ["running", "running"]


@pytest.mark.django_db
def test_max_runs_ends_the_schedule(api) -> None:
    workflow, start = scheduled(api, max_runs=2)
    assert plan(start + timedelta(seconds=60)) == (2, 0)
    workflow.refresh_from_db()
    assert (workflow.next_run_at, workflow.runs_started) == (None, 2)
    assert plan(start + timedelta(seconds=600)) == (0, 0)


@pytest.mark.django_db
def test_an_excluded_occurrence_is_recorded_skipped_with_its_reason(api) -> None:
    workflow, start = scheduled(api)
    window = {"start": iso(start - timedelta(seconds=1)), "end": iso(start + timedelta(seconds=1))}
    api.patch(
        f"/api/v1/workflows/{workflow.pk}",
        {
            "schedule": {
                "type": "interval",
                "every": 60,
                "start_at": iso(start),
                "exclude_windows": [window],
            }
        },
        format="json",
    )
    assert plan(start + timedelta(seconds=60)) == (1, 1)
    excluded, started = runs_of(workflow)
    assert excluded.status == "skipped" and excluded.reason
    assert started.status == "running"


@pytest.mark.django_db
def test_a_workflow_without_a_schedule_is_never_started_by_the_pass(api) -> None:
    created = api.post("/api/v1/workflows", {"name": "wf", "steps": TWO}, format="json")
    assert created.json()["next_run_at"] is None
    assert plan(db_now() + timedelta(days=365)) == (0, 0)
    assert not WorkflowRun.objects.exists()


@pytest.mark.django_db
def test_a_step_body_no_longer_valid_records_the_occurrence_not_started(api) -> None:
    workflow, start = scheduled(api)
    # Valid when created; the handler it names is gone since (a deploy without it, say).
    steps = [
        {
            "id": "a",
            "after": [],
            "on": "success",
            "task": {"kind": "handler", "payload": {"name": "gone"}},
        }
    ]
    Workflow.objects.filter(pk=workflow.pk).update(steps=steps)
    assert plan(start) == (0, 1)
    [workflow_run] = runs_of(workflow)
    assert workflow_run.status == "skipped"
    assert workflow_run.reason.startswith("not started: steps[0] (a): ")
    assert "payload" in workflow_run.reason


@pytest.mark.django_db
def test_a_workflow_that_fails_to_start_is_pushed_back_and_spares_the_others(api) -> None:
    broken, start = scheduled(api)
    fine, _ = scheduled(api)
    # A schedule this code cannot evaluate (stored by an older release, say).
    Workflow.objects.filter(pk=broken.pk).update(schedule={"type": "cron", "expression": "bad"})
    assert plan(start) == (1, 0)
    assert [r.scheduled_at for r in runs_of(fine)] == [start]
    assert runs_of(broken) == []
    broken.refresh_from_db()
    assert broken.next_run_at == start + timedelta(seconds=RETRY_SECONDS)


@pytest.mark.django_db
def test_the_scheduler_sleeps_until_a_workflows_next_occurrence_and_starts_it(api) -> None:
    workflow, _ = scheduled(api)
    scheduler = Scheduler()
    assert scheduler.sleep_seconds() == 2.0  # an hour away: capped at the heartbeat interval

    def every_minute_from(at: datetime) -> None:
        schedule = schedules.normalize(
            {"type": "interval", "every": 60, "start_at": iso(at)}, now=db_now()
        )
        Workflow.objects.filter(pk=workflow.pk).update(schedule=schedule, next_run_at=at)

    every_minute_from(db_now() + timedelta(seconds=1.5))
    # Not half a look-ahead later, as a task's planning: when it is due.
    assert 0.9 < scheduler.sleep_seconds() <= 1.5
    every_minute_from(db_now() - timedelta(seconds=1))
    assert scheduler.sleep_seconds() == MIN_PAUSE_SECONDS
    assert scheduler.run_once() is True
    assert [r.status for r in runs_of(workflow)] == ["running"]
    assert scheduler.run_once() is False
