"""Releasing workflow steps in-process: the trigger on a run's final outcome releases the steps
whose upstream steps have all ended (with their outputs), skips those whose `on` is not met and
the steps after them in turn, and ends the workflow run by the status rule; the reviewer's sweep
finishes what was left; cancel ends it all."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import pytest
from django.db import IntegrityError, connection, transaction
from rest_framework.test import APIClient

from tasks.admission import upstream
from tasks.models import Run, Task, WorkflowRun, WorkflowStep
from tasks.transitions import workflows

NOOP = {"kind": "handler", "payload": {"name": "noop"}}
DIAMOND = [
    {"id": "a", "task": NOOP},
    {"id": "b", "after": ["a"], "task": NOOP},
    {"id": "c", "after": ["a"], "task": NOOP},
    {"id": "d", "after": ["b", "c"], "task": NOOP},
]
FAILURE = [
    {"id": "a", "task": NOOP},
    {"id": "ok", "after": ["a"], "task": NOOP},
    {"id": "after_ok", "after": ["ok"], "task": NOOP},
    {"id": "handle", "after": ["a"], "on": "failure", "task": NOOP},
    {"id": "cleanup", "after": ["a"], "on": "always", "task": NOOP},
]


def start(api: APIClient, steps: list[dict]) -> dict:
    created = api.post("/api/v1/workflows", {"name": "wf", "steps": steps}, format="json")
    assert created.status_code == 201, created.content
    started = api.post(f"/api/v1/workflows/{created.json()['id']}/run")
    assert started.status_code == 201, started.content
    return started.json()


def step_run(workflow_run_id: str, step_id: str) -> Run:
    return Run.objects.get(
        workflow_step__workflow_run_id=workflow_run_id, workflow_step__step_id=step_id
    )


def end(workflow_run_id: str, step_id: str, status: str, output: str = "") -> None:
    """Record a step's final outcome as a worker's UPDATE does (the trigger fires on it)."""
    run = step_run(workflow_run_id, step_id)
    assert run.status == "scheduled", (step_id, run.status)
    Run.objects.filter(pk=run.pk).update(
        status=status, output=output, finished_at=datetime.now(UTC), attempt=1
    )


def statuses(workflow_run_id: str) -> dict[str, str | None]:
    return {
        s.step_id: s.run.status if s.run else None
        for s in WorkflowStep.objects.filter(workflow_run_id=workflow_run_id).select_related("run")
    }


@pytest.mark.django_db
def test_steps_with_after_are_held_beyond_any_claim(api) -> None:
    wr = start(api, DIAMOND)
    assert statuses(wr["id"]) == {
        "a": "scheduled",
        "b": "waiting_for_resource",
        "c": "waiting_for_resource",
        "d": "waiting_for_resource",
    }
    d = step_run(wr["id"], "d")
    assert (d.wait_kind, d.execute_at) == ("upstream", upstream.HELD_UNTIL)
    assert d.wait_reason == "waiting for upstream steps b, c"


@pytest.mark.django_db
def test_diamond_releases_in_order_with_outputs_and_succeeds(api) -> None:
    wr = start(api, DIAMOND)
    end(wr["id"], "a", "succeeded", '{"rows": 3}')
    assert statuses(wr["id"])["b"] == statuses(wr["id"])["c"] == "scheduled"
    b = step_run(wr["id"], "b")
    assert b.wait_kind == "" and b.execute_at < upstream.HELD_UNTIL
    assert Task.objects.get(pk=b.task_id).payload["context"] == {
        "steps": {"a": {"output": {"rows": 3}}}
    }
    end(wr["id"], "b", "succeeded", '"from b"')
    assert statuses(wr["id"])["d"] == "waiting_for_resource"  # c has not ended
    end(wr["id"], "c", "succeeded", "plain text")
    d = step_run(wr["id"], "d")
    assert d.status == "scheduled"
    assert Task.objects.get(pk=d.task_id).payload["context"] == {
        "steps": {"b": {"output": "from b"}, "c": {"output": "plain text"}}
    }
    assert WorkflowRun.objects.get(pk=wr["id"]).status == "running"
    end(wr["id"], "d", "succeeded")
    workflow_run = WorkflowRun.objects.get(pk=wr["id"])
    assert workflow_run.status == "succeeded" and workflow_run.finished_at is not None


@pytest.mark.django_db
def test_a_failure_skips_success_steps_in_turn_and_runs_failure_and_always_steps(api) -> None:
    wr = start(api, FAILURE)
    end(wr["id"], "a", "failed")
    found = statuses(wr["id"])
    assert found == {
        "a": "failed",
        "ok": "skipped",
        "after_ok": "skipped",
        "handle": "scheduled",
        "cleanup": "scheduled",
    }
    ok = step_run(wr["id"], "ok")
    assert ok.skip_kind == "upstream" and ok.error == "skipped: runs on success, upstream a failed"
    assert step_run(wr["id"], "after_ok").error == ("skipped: runs on success, upstream ok skipped")
    end(wr["id"], "handle", "succeeded")
    end(wr["id"], "cleanup", "succeeded")
    # A failure an `on: failure` step handled: succeeded.
    assert WorkflowRun.objects.get(pk=wr["id"]).status == "succeeded"


@pytest.mark.django_db
def test_a_failure_no_failure_step_handled_fails_the_workflow_run(api) -> None:
    wr = start(api, FAILURE)
    end(wr["id"], "a", "succeeded")
    assert statuses(wr["id"])["handle"] == "skipped"
    end(wr["id"], "ok", "failed")
    assert statuses(wr["id"])["after_ok"] == "skipped"
    end(wr["id"], "cleanup", "succeeded")
    assert WorkflowRun.objects.get(pk=wr["id"]).status == "failed"


@pytest.mark.django_db
def test_cancel_cancels_pending_steps_and_ends_the_workflow_run(api) -> None:
    wr = start(api, DIAMOND)
    response = api.post(f"/api/v1/workflow-runs/{wr['id']}/cancel")
    assert response.status_code == 200
    assert response.json()["status"] == "cancelled"
    assert set(statuses(wr["id"]).values()) == {"cancelled"}


@pytest.mark.django_db
def test_the_reviewer_sweep_releases_what_the_trigger_missed_once(api) -> None:
    wr = start(api, DIAMOND)
    with connection.cursor() as cursor:
        # As a crash's leftover: a's end recorded, no trigger fired (replica role).
        cursor.execute("SET session_replication_role = replica")
        end(wr["id"], "a", "succeeded", "1")
        cursor.execute("SET session_replication_role = origin")
    assert statuses(wr["id"])["b"] == "waiting_for_resource"
    assert workflows.resolve_workflow_runs() == 1
    assert statuses(wr["id"])["b"] == statuses(wr["id"])["c"] == "scheduled"
    assert workflows.resolve_workflow_runs() == 0


@pytest.mark.django_db
def test_each_step_run_is_made_once_per_workflow_run(api) -> None:
    wr = start(api, DIAMOND)
    with pytest.raises(IntegrityError, match="workflow_step_unique_run_step"), transaction.atomic():
        WorkflowStep.objects.create(workflow_run_id=wr["id"], step_id="a", run=None, after=[])
    assert WorkflowStep.objects.filter(workflow_run_id=wr["id"]).count() == 4


@pytest.mark.concurrency
@pytest.mark.django_db(transaction=True)
def test_siblings_ending_at_once_release_their_join_once(api) -> None:
    # b's end holds the workflow run's lock until it commits; c's end, meanwhile, waits for
    # that lock and then reads b ended: d is released by the second, never missed by both.
    wr = start(api, DIAMOND)
    end(wr["id"], "a", "succeeded")
    b, c = step_run(wr["id"], "b"), step_run(wr["id"], "c")
    b_ended = threading.Event()
    errors: list[BaseException] = []

    def finish(run: Run, *, wait: threading.Event | None, hold: float) -> None:
        try:
            if wait is not None:
                wait.wait(5)
            with transaction.atomic():
                Run.objects.filter(pk=run.pk).update(
                    status="succeeded", finished_at=datetime.now(UTC), attempt=1
                )
                if wait is None:
                    b_ended.set()
                    time.sleep(hold)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [
        threading.Thread(target=finish, args=(b,), kwargs={"wait": None, "hold": 0.5}),
        threading.Thread(target=finish, args=(c,), kwargs={"wait": b_ended, "hold": 0}),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert errors == []
    d = step_run(wr["id"], "d")
    assert d.status == "scheduled"
    assert Task.objects.get(pk=d.task_id).payload["context"]["steps"].keys() == {"b", "c"}


@pytest.mark.django_db
def test_a_step_whose_upstream_run_is_gone_is_skipped_by_the_sweep_not_left_waiting(api) -> None:
    wr = start(api, FAILURE)
    step_run(wr["id"], "a").delete()  # as a replanning of a's task would withdraw it
    assert workflows.resolve_workflow_runs() == 1
    found = statuses(wr["id"])
    assert (found["ok"], found["handle"], found["cleanup"]) == ("skipped", "skipped", "scheduled")
    assert step_run(wr["id"], "ok").error == "skipped: runs on success, upstream a gone"


@pytest.mark.django_db
def test_retry_runs_only_the_failed_and_skipped_steps_again(api) -> None:
    steps = [
        {"id": "a", "task": NOOP},
        {"id": "b", "after": ["a"], "task": NOOP},
        {"id": "c", "after": ["b"], "task": NOOP},
        {"id": "handle", "after": ["b"], "on": "failure", "task": {**NOOP, "max_attempts": 1}},
    ]
    wr = start(api, steps)
    end(wr["id"], "a", "succeeded", '"kept"')
    end(wr["id"], "b", "failed")
    end(wr["id"], "handle", "failed")
    assert statuses(wr["id"])["c"] == "skipped"
    assert WorkflowRun.objects.get(pk=wr["id"]).status == "failed"
    a_before = step_run(wr["id"], "a")

    retried = api.post(f"/api/v1/workflow-runs/{wr['id']}/retry")
    assert retried.status_code == 200, retried.content
    assert retried.json()["status"] == "running" and retried.json()["finished_at"] is None
    # a kept its run and output; b (its upstream succeeded) starts at once with a's output;
    # c and handle wait for b again.
    a_after = step_run(wr["id"], "a")
    assert (a_after.status, a_after.finished_at) == ("succeeded", a_before.finished_at)
    assert statuses(wr["id"]) == {
        "a": "succeeded",
        "b": "scheduled",
        "c": "waiting_for_resource",
        "handle": "waiting_for_resource",
    }
    b = step_run(wr["id"], "b")
    assert b.max_attempts == b.attempt + Task.objects.get(pk=b.task_id).max_attempts
    assert Task.objects.get(pk=b.task_id).payload["context"]["steps"] == {"a": {"output": "kept"}}
    end(wr["id"], "b", "succeeded")
    assert statuses(wr["id"])["handle"] == "skipped"  # on failure: b succeeded this time
    end(wr["id"], "c", "succeeded")
    assert WorkflowRun.objects.get(pk=wr["id"]).status == "succeeded"
    # A workflow run that is not failed or cancelled cannot be retried.
    assert api.post(f"/api/v1/workflow-runs/{wr['id']}/retry").status_code == 409


@pytest.mark.django_db
def test_a_step_run_retried_alone_is_counted_once_and_its_end_still_ends_the_workflow_run(
    api,
) -> None:
    wr = start(api, FAILURE)
    end(wr["id"], "a", "succeeded")
    end(wr["id"], "ok", "failed")
    ok = step_run(wr["id"], "ok")
    assert api.post(f"/api/v1/runs/{ok.pk}/retry").status_code == 200
    end(wr["id"], "cleanup", "succeeded")
    assert WorkflowRun.objects.get(pk=wr["id"]).status == "running"  # ok runs again
    end(wr["id"], "ok", "succeeded")
    assert statuses(wr["id"])["after_ok"] == "skipped"  # decided at ok's first end
    assert WorkflowStep.objects.get(workflow_run_id=wr["id"], step_id="after_ok").waiting == 0
    assert WorkflowRun.objects.get(pk=wr["id"]).status == "succeeded"
