"""A workflow run's end queues its event in the transaction that ends it, whoever ends it (a step
run's outcome, the reviewer's sweep), once per end, to the workflow's `notify` channels and the
owner's channels listing the event in `all_tasks_events`; a cancel queues nothing."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection

from notifications.messages import build_message
from notifications.models import Notification
from tasks.models import Run, WorkflowRun
from tasks.transitions import workflows
from tests.notifications.conftest import ChannelFactory

pytestmark = pytest.mark.django_db

NOOP = {"kind": "handler", "payload": {"name": "noop"}}
STEPS = [{"id": "a", "task": NOOP}, {"id": "b", "after": ["a"], "task": NOOP}]


def start(api, notify: list[dict]) -> str:
    body = {"name": "wf", "steps": STEPS, "notify": notify}
    created = api.post("/api/v1/workflows", body, format="json")
    assert created.status_code == 201, created.content
    return api.post(f"/api/v1/workflows/{created.json()['id']}/run").json()["id"]


def end(workflow_run_id: str, step_id: str, status: str) -> None:
    """A step's final outcome as a worker's UPDATE records it (the triggers fire on it)."""
    Run.objects.filter(
        workflow_step__workflow_run_id=workflow_run_id, workflow_step__step_id=step_id
    ).update(status=status, finished_at=datetime.now(UTC), attempt=1)


def queued(workflow_run_id: str) -> list[tuple[str, str]]:
    rows = Notification.objects.filter(workflow_run_id=workflow_run_id).order_by("id")
    return [(str(n.channel_id), n.event) for n in rows]


def test_an_end_queues_to_notify_and_all_task_channels_with_the_end(api, user) -> None:
    named = ChannelFactory(owner=user)
    everything = ChannelFactory(owner=user, all_tasks_events=["workflow_failed"])
    ChannelFactory(owner=user, all_tasks_events=["failed"])  # a task event only
    ChannelFactory(all_tasks_events=["workflow_failed"])  # another user's
    wr = start(api, [{"channel": str(named.id), "events": ["workflow_failed"]}])
    end(wr, "a", "succeeded")
    assert queued(wr) == []
    end(wr, "b", "failed")
    assert WorkflowRun.objects.get(pk=wr).status == "failed"
    assert sorted(queued(wr)) == sorted(
        [(str(named.id), "workflow_failed"), (str(everything.id), "workflow_failed")]
    )
    listed = api.get(f"/api/v1/notifications?workflow_run={wr}").json()["results"]
    assert sorted((n["channel"], n["workflow_run"], n["run"], n["task"]) for n in listed) == sorted(
        [(str(c.id), wr, None, None) for c in (named, everything)]
    )
    row = Notification.objects.filter(workflow_run_id=wr).first()
    assert (row.run_id, row.task_id, row.attempt, row.retry_until) == (None, None, 0, None)
    message = build_message(row, attempt=None, public_url="https://s.example")
    assert message.subject == "Workflow wf failed"
    assert message.body["workflow_run"]["failed_steps"][0]["id"] == "b"
    assert message.run_url == f"https://s.example/admin/tasks/workflowrun/{wr}/change/"

    # A retry that ends again queues again; a cancel queues nothing.
    workflows.retry_workflow_run(workflow_run=WorkflowRun.objects.get(pk=wr), now=datetime.now(UTC))
    assert len(queued(wr)) == 2
    end(wr, "b", "failed")
    assert len(queued(wr)) == 4
    other = start(api, [{"channel": str(named.id), "events": ["workflow_failed"]}])
    workflows.cancel_workflow_run(
        workflow_run=WorkflowRun.objects.get(pk=other), now=datetime.now(UTC)
    )
    assert WorkflowRun.objects.get(pk=other).status == "cancelled"
    assert queued(other) == []


def test_the_reviewers_sweep_ending_a_workflow_run_queues_its_event(api, user) -> None:
    channel = ChannelFactory(owner=user)
    wr = start(api, [{"channel": str(channel.id), "events": ["workflow_succeeded"]}])
    end(wr, "a", "succeeded")
    with connection.cursor() as cursor:
        # As a crash's leftover: b's end recorded with no trigger fired (replica role).
        cursor.execute("SET session_replication_role = replica")
        end(wr, "b", "succeeded")
        cursor.execute("SET session_replication_role = origin")
    assert WorkflowRun.objects.get(pk=wr).status == "running"
    assert queued(wr) == []
    workflows.resolve_workflow_runs()
    assert WorkflowRun.objects.get(pk=wr).status == "succeeded"
    assert queued(wr) == [(str(channel.id), "workflow_succeeded")]
    workflows.resolve_workflow_runs()
    assert len(queued(wr)) == 1
