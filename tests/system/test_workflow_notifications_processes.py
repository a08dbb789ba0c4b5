"""A workflow's `notify`: `workflow_succeeded` and `workflow_failed` reach a real webhook receiver
on 127.0.0.1 once per ended workflow run, delivered by a worker process's delivery thread; a
cancelled workflow run notifies nobody; a retried one that ends again notifies again."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator

import pytest
from django.conf import settings

import tests.handlers  # noqa: F401 (the API validates step bodies against these handlers)
from notifications.models import Notification
from tasks.models import WorkflowRun
from tests.conftest import client_for, process_env, wait_for
from tests.factories import UserFactory
from tests.notifications.conftest import Receiver, serving, webhook_channel

pytestmark = pytest.mark.processes

EVENTS = ["workflow_succeeded", "workflow_failed"]


def step(name: str) -> dict:
    return {"kind": "handler", "payload": {"name": "step", "args": {"name": name}}}


FAIL = {"kind": "handler", "payload": {"name": "fail"}, "max_attempts": 1}


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with serving() as recv:
        yield recv


@pytest.fixture(autouse=True)
def _outbound_to_loopback(settings) -> None:
    settings.SCHEDULER_OUTBOUND_ALLOW = ["127.0.0.1"]
    settings.SCHEDULER_PUBLIC_URL = "https://scheduler.example"


def ended(api, workflow_run_id: str) -> bool:
    return api.get(f"/api/v1/workflow-runs/{workflow_run_id}").json()["status"] != "running"


def test_each_ended_workflow_run_notifies_once_by_its_status(processes, receiver) -> None:
    user = UserFactory()
    api = client_for(user)
    channel = webhook_channel(receiver, user)
    notify = [{"channel": str(channel.id), "events": EVENTS}]
    good = api.post(
        "/api/v1/workflows",
        {
            "name": "good",
            "steps": [
                {"id": "a", "task": step("a")},
                {"id": "b", "after": ["a"], "task": step("b")},
                {"id": "c", "after": ["a"], "task": step("c")},
                {"id": "d", "after": ["b", "c"], "task": step("d")},
            ],
            "notify": notify,
        },
        format="json",
    )
    assert good.status_code == 201, good.content
    assert good.json()["notify"] == notify
    bad = api.post(
        "/api/v1/workflows",
        {
            "name": "bad",
            "steps": [{"id": "a", "task": FAIL}, {"id": "b", "after": ["a"], "task": step("b")}],
            "notify": notify,
        },
        format="json",
    )
    assert bad.status_code == 201, bad.content
    # Subscribed to neither event: its end queues nothing.
    quiet = api.post(
        "/api/v1/workflows",
        {
            "name": "quiet",
            "steps": [{"id": "a", "task": step("a")}],
            "notify": [{"channel": str(channel.id), "events": ["workflow_failed"]}],
        },
        format="json",
    )
    assert quiet.status_code == 201, quiet.content
    # Cancelled before any worker runs: no event.
    cancelled_run = api.post(f"/api/v1/workflows/{good.json()['id']}/run").json()["id"]
    assert api.post(f"/api/v1/workflow-runs/{cancelled_run}/cancel").status_code == 200

    good_runs = [api.post(f"/api/v1/workflows/{good.json()['id']}/run").json()["id"] for _ in "123"]
    bad_run = api.post(f"/api/v1/workflows/{bad.json()['id']}/run").json()["id"]
    quiet_run = api.post(f"/api/v1/workflows/{quiet.json()['id']}/run").json()["id"]
    env = process_env(
        SCHEDULER_HANDLER_MODULES="tests.handlers",
        SCHEDULER_OUTBOUND_ALLOW="127.0.0.1",
        SCHEDULER_PUBLIC_URL="https://scheduler.example",
        SCHEDULER_ENCRYPTION_KEY=settings.SCHEDULER_ENCRYPTION_KEY,
    )
    processes.start("runworker", "--concurrency", "2", env=env)
    all_runs = [*good_runs, bad_run, quiet_run]
    wait_for(
        lambda: all(ended(api, r) for r in all_runs),
        timeout=60,
        interval=0.2,
        details=processes.logs,
    )
    wait_for(lambda: len(receiver.accepted) >= 4, timeout=30, interval=0.1, details=processes.logs)
    time.sleep(1.5)  # a second notification for the same end would have arrived by now

    deliveries = receiver.accepted
    assert all(d["verified"] for d in deliveries)
    by_run = Counter((d["body"]["workflow_run"]["id"], d["body"]["event"]) for d in deliveries)
    assert by_run == Counter(
        {**{(r, "workflow_succeeded"): 1 for r in good_runs}, (bad_run, "workflow_failed"): 1}
    )
    failed = next(d for d in deliveries if d["body"]["event"] == "workflow_failed")
    assert failed["headers"]["X-Scheduler-Event"] == "workflow_failed"
    body = failed["body"]
    assert body["task"] is None and body["run"] is None
    assert body["workflow"]["id"] == bad.json()["id"] and body["workflow"]["name"] == "bad"
    assert body["workflow_run"]["status"] == "failed"
    assert [s["id"] for s in body["workflow_run"]["failed_steps"]] == ["a"]
    assert (
        body["workflow_run"]["url"] == f"https://scheduler.example/api/v1/workflow-runs/{bad_run}"
    )
    assert WorkflowRun.objects.get(pk=cancelled_run).status == "cancelled"
    rows = Notification.objects.filter(workflow_run__isnull=False)
    assert sorted(rows.values_list("status", flat=True)) == ["sent"] * 4
    assert not rows.filter(workflow_run_id__in=[cancelled_run, quiet_run]).exists()

    # A retry that fails again is a second end: one more `workflow_failed`, for that end.
    assert api.post(f"/api/v1/workflow-runs/{bad_run}/retry").status_code == 200
    wait_for(lambda: ended(api, bad_run), timeout=30, interval=0.2, details=processes.logs)
    wait_for(lambda: len(receiver.accepted) >= 5, timeout=30, interval=0.1, details=processes.logs)
    time.sleep(1.5)
    again = [d["body"]["workflow_run"]["id"] for d in receiver.accepted[4:]]
    assert again == [bad_run]


@pytest.mark.django_db
def test_a_workflow_notify_names_the_callers_channels_and_workflow_events_only(receiver) -> None:
    user = UserFactory()
    api = client_for(user)
    mine = webhook_channel(receiver, user)
    theirs = webhook_channel(receiver, UserFactory())
    steps = [{"id": "a", "task": step("a")}]

    def create(notify: list[dict]):
        return api.post(
            "/api/v1/workflows", {"name": "w", "steps": steps, "notify": notify}, format="json"
        )

    answer = create([{"channel": str(theirs.id), "events": ["workflow_failed"]}])
    assert answer.status_code == 400
    assert answer.json()["notify"]["0"]["channel"] == ["No channel with this id among yours."]
    answer = create([{"channel": str(mine.id), "events": ["succeeded"]}])
    assert answer.status_code == 400
    assert answer.json()["notify"]["0"]["events"]["0"] == [
        '"succeeded" is not a valid choice; use one of workflow_succeeded, workflow_failed,'
        " workflow_overdue."
    ]
    answer = create([{"channel": str(mine.id).upper(), "events": ["workflow_failed"]}])
    assert answer.status_code == 201, answer.content
    assert answer.json()["notify"] == [{"channel": str(mine.id), "events": ["workflow_failed"]}]
