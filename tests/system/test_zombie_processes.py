"""Zombie runs with a real worker, real payload processes and a real webhook
receiver on 127.0.0.1: a payload that uses no CPU and writes nothing past the threshold is
flagged, its owner notified, and with `on_zombie: "cancel"` it is cancelled."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from rest_framework.test import APIClient

from tasks.models import Attempt, Run, Task
from tests.conftest import wait_for
from tests.notifications.conftest import (
    Receiver,
    due_run,
    serving,
    subscribed_task,
    webhook_channel,
)
from tests.system.test_notifications_processes import role_env

pytestmark = pytest.mark.processes

THRESHOLD = 2  # TASKS_ZOMBIE_AFTER_SECONDS for these workers


def executable_task(channel, script: str, **fields) -> Task:
    name = default_storage.save("executables/job.sh", ContentFile(script.encode()))
    task = subscribed_task(
        channel, ["zombie"], kind="executable", payload={"args": []}, timeout=120, **fields
    )
    Task.objects.filter(pk=task.pk).update(executable=name)
    return task


def start_worker(processes, settings, concurrency: int = 2) -> None:
    env = role_env(
        MEDIA_ROOT=str(settings.MEDIA_ROOT),
        TASKS_ZOMBIE_AFTER_SECONDS=str(THRESHOLD),
        TASKS_HEARTBEAT_SECONDS="0.5",
        SCHEDULER_SANDBOX_ALLOW_RLIMIT_ONLY="true",
    )
    processes.start("runworker", "--concurrency", str(concurrency), env=env)


def zombie_deliveries(receiver: Receiver) -> list[dict]:
    return [d for d in receiver.accepted if d["body"]["event"] == "zombie"]


@pytest.fixture(autouse=True)
def _media(settings, tmp_path) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with serving() as recv:
        yield recv


def test_an_idle_payload_is_flagged_and_its_owner_notified(
    processes, receiver: Receiver, user, api: APIClient, settings
):
    channel = webhook_channel(receiver, user)
    idle = due_run(executable_task(channel, "#!/bin/sh\necho started\nexec sleep 60\n"))
    # Never idle for 2 s: a line every half second.
    talks = "#!/bin/sh\nfor i in 1 2 3 4 5 6 7 8 9 10; do echo $i; sleep 0.5; done\n"
    chatty = due_run(executable_task(channel, talks))
    start_worker(processes, settings)

    [delivery] = wait_for(
        lambda: zombie_deliveries(receiver), timeout=40, interval=0.1, details=processes.logs
    )

    assert delivery["verified"] and delivery["body"]["run"]["id"] == str(idle.pk)
    idle.refresh_from_db()
    assert idle.status == "running" and idle.zombie_since is not None
    # Since when: the moment it went quiet (its one line of output), not when it was noticed.
    assert idle.started_at <= idle.zombie_since < idle.started_at + timedelta(seconds=THRESHOLD)
    shown = api.get(f"/api/v1/runs/{idle.pk}").json()
    assert shown["zombie"] is True
    assert shown["zombie_since"].startswith(idle.zombie_since.strftime("%Y-%m-%dT%H:%M:%S"))
    # The notification says since when too.
    quiet_since = delivery["body"]["run"]["zombie_since"]
    assert quiet_since.startswith(idle.zombie_since.strftime("%Y-%m-%dT%H:%M:%S")), quiet_since
    body = api.get("/metrics").content.decode()
    assert "scheduler_runs_zombie 1.0" in body
    # The chatty one ran to the end unflagged; the idle one keeps running (on_zombie: notify).
    wait_for(lambda: Run.objects.get(pk=chatty.pk).status == "succeeded", timeout=30)
    chatty.refresh_from_db()
    assert (
        chatty.zombie_since is None
        and api.get(f"/api/v1/runs/{chatty.pk}").json()["zombie"] is False
    )
    assert Run.objects.get(pk=idle.pk).status == "running"
    assert len(zombie_deliveries(receiver)) == 1, "flagged once, not on every check"
    # A cancel stops the idle payload (else the worker's shutdown waits out its grace for it).
    assert api.post(f"/api/v1/runs/{idle.pk}/cancel").status_code == 200
    wait_for(lambda: Run.objects.get(pk=idle.pk).status == "cancelled", timeout=20)


def test_on_zombie_cancel_cancels_the_run(processes, receiver: Receiver, user, settings):
    channel = webhook_channel(receiver, user)
    run = due_run(executable_task(channel, "#!/bin/sh\nexec sleep 60\n", on_zombie="cancel"))
    start_worker(processes, settings, concurrency=1)

    wait_for(
        lambda: Run.objects.get(pk=run.pk).status == "cancelled",
        timeout=40,
        interval=0.1,
        details=processes.logs,
    )

    run.refresh_from_db()
    assert run.zombie_since is not None
    assert "zombie" in run.error
    attempt = Attempt.objects.get(run=run)
    assert attempt.outcome == "cancelled" and "zombie" in attempt.error
    wait_for(lambda: zombie_deliveries(receiver), timeout=15)
    # Stopped well before its 60 s sleep or its 120 s timeout.
    assert run.finished_at - run.started_at < timedelta(seconds=THRESHOLD + 10)
