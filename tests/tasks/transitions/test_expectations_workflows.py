"""A workflow's `expect.success_within`, judged by the reviewer's pass: `overdue` once no
workflow run succeeded within it, `workflow_overdue` queued once per lapse to its `notify`
channels and the owner's all-task ones, and `ok` again after a success."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command
from django.db import connection

from notifications.messages import build_message
from notifications.models import Notification
from tasks.models import Workflow, WorkflowRun
from tasks.transitions.expectations import review_workflow_expectations
from tests.notifications.conftest import ChannelFactory

pytestmark = pytest.mark.django_db

NOOP = {"kind": "handler", "payload": {"name": "noop"}}


def ago(seconds: float) -> datetime:
    return datetime.now(UTC) - timedelta(seconds=seconds)


def expecting(api, channel, *, within: float = 60, created_ago: float = 120) -> Workflow:
    body = {
        "name": "nightly",
        "steps": [{"id": "a", "task": NOOP}],
        "notify": [{"channel": str(channel.id), "events": ["workflow_overdue"]}],
        "expect": {"success_within": within},
    }
    created = api.post("/api/v1/workflows", body, format="json")
    assert created.status_code == 201, created.content
    assert (created.json()["expect"], created.json()["health"]) == (
        {"success_within": within},
        "ok",
    )
    Workflow.objects.filter(pk=created.json()["id"]).update(created_at=ago(created_ago))
    return Workflow.objects.get(pk=created.json()["id"])


def succeeded(workflow: Workflow, *, finished_ago: float) -> None:
    WorkflowRun.objects.create(
        workflow=workflow,
        owner=workflow.owner,
        status=WorkflowRun.Status.SUCCEEDED,
        started_at=ago(finished_ago + 1),
        finished_at=ago(finished_ago),
    )


def alerts(workflow: Workflow) -> list[tuple[str, str]]:
    rows = Notification.objects.filter(workflow=workflow).order_by("created_at", "id")
    return [(str(n.channel_id), n.event) for n in rows]


def health(api, workflow: Workflow) -> str:
    return api.get(f"/api/v1/workflows/{workflow.pk}").json()["health"]


def test_an_overdue_workflow_queues_one_notification_per_lapse(api, user) -> None:
    named = ChannelFactory(owner=user)
    everything = ChannelFactory(owner=user, all_tasks_events=["workflow_overdue"])
    ChannelFactory(all_tasks_events=["workflow_overdue"])  # another user's
    workflow = expecting(api, named)

    assert review_workflow_expectations() == [(workflow.pk, "overdue")]
    assert health(api, workflow) == "overdue"
    first = sorted([(str(named.id), "workflow_overdue"), (str(everything.id), "workflow_overdue")])
    assert sorted(alerts(workflow)) == first
    # The same lapse: judged again, nothing changes and nothing more is queued.
    assert review_workflow_expectations() == []
    assert sorted(alerts(workflow)) == first

    # A success clears it, queuing nothing.
    succeeded(workflow, finished_ago=1)
    assert review_workflow_expectations() == [(workflow.pk, "ok")]
    assert health(api, workflow) == "ok"
    assert review_workflow_expectations() == []
    assert len(alerts(workflow)) == 2

    # A new lapse (no success within 60 s of the last one) is alerted again, once.
    WorkflowRun.objects.filter(workflow=workflow).update(finished_at=ago(90))
    assert review_workflow_expectations() == [(workflow.pk, "overdue")]
    assert review_workflow_expectations() == []
    assert len(alerts(workflow)) == 4
    # The lapse runs from the last success's end.
    last = WorkflowRun.objects.get(workflow=workflow)
    assert Workflow.objects.get(pk=workflow.pk).overdue_from == last.finished_at
    latest = Notification.objects.filter(workflow=workflow, channel=named).latest("created_at")
    message = build_message(latest, attempt=None, public_url="http://sched.test")
    assert message.subject == "Workflow nightly is overdue: no workflow run succeeded"
    assert message.body["workflow"]["id"] == str(workflow.pk)
    assert message.body["workflow_run"] is None and message.body["run"] is None
    assert "at least every 60 s" in message.text


def test_a_workflow_within_its_expectation_is_left_alone(api, user) -> None:
    workflow = expecting(api, ChannelFactory(owner=user), within=3600)
    succeeded(workflow, finished_ago=10)
    assert review_workflow_expectations() == []
    assert health(api, workflow) == "ok" and alerts(workflow) == []


def test_a_failed_or_skipped_workflow_run_is_no_success(api, user) -> None:
    workflow = expecting(api, ChannelFactory(owner=user))
    for status in (WorkflowRun.Status.FAILED, WorkflowRun.Status.SKIPPED):
        WorkflowRun.objects.create(
            workflow=workflow,
            owner=user,
            status=status,
            started_at=ago(2),
            finished_at=ago(1),
        )
    assert review_workflow_expectations() == [(workflow.pk, "overdue")]
    assert len(alerts(workflow)) == 1


def test_removing_the_expectation_makes_it_ok_without_an_alert(api, user) -> None:
    workflow = expecting(api, ChannelFactory(owner=user))
    review_workflow_expectations()
    assert health(api, workflow) == "overdue"
    response = api.patch(f"/api/v1/workflows/{workflow.pk}", {"expect": {}}, format="json")
    assert response.status_code == 200, response.content
    assert (response.json()["expect"], response.json()["health"]) == ({}, "ok")
    assert review_workflow_expectations() == []
    assert len(alerts(workflow)) == 1


@pytest.mark.concurrency
@pytest.mark.django_db(transaction=True)
def test_reviewers_judging_at_once_alert_a_lapse_once(api, user) -> None:
    workflow = expecting(api, ChannelFactory(owner=user))
    start, changed, errors = threading.Barrier(4), [], []

    def reviewer() -> None:
        try:
            start.wait(timeout=30)
            for _ in range(3):
                changed.extend(review_workflow_expectations())
        except Exception as exc:  # reported below, with the others
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=reviewer) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert errors == []
    assert changed == [(workflow.pk, "overdue")]
    assert len(alerts(workflow)) == 1


@pytest.mark.django_db(transaction=True)  # the loop closes its connection
def test_the_reviewers_pass_judges_workflows(api, user) -> None:
    workflow = expecting(api, ChannelFactory(owner=user))
    call_command("runreviewer", "--once")
    assert health(api, workflow) == "overdue"
    assert len(alerts(workflow)) == 1
