"""Delivery by the worker's thread and by `runnotifier`, with real processes where it matters."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator

import pytest
from django.conf import settings
from django.core.management import call_command

from notifications.delivery_thread import DeliveryThread
from notifications.models import Notification
from tasks.models import Run
from tests.conftest import process_env, wait_for
from tests.notifications.conftest import (
    Receiver,
    due_run,
    finish,
    serving,
    subscribed_task,
    webhook_channel,
)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A webhook receiver on 127.0.0.1, as the notifications tests have it."""
    with serving() as recv:
        yield recv


@pytest.fixture(autouse=True)
def _outbound_to_loopback(settings) -> None:
    # This process delivers too (the delivery thread, runnotifier --once): to the receiver.
    settings.SCHEDULER_OUTBOUND_ALLOW = ["127.0.0.1"]
    settings.SCHEDULER_PUBLIC_URL = "https://scheduler.example"


def role_env(**extra: str) -> dict[str, str]:
    # The pytest process encrypted the channel secret: the roles need the same key.
    return process_env(
        SCHEDULER_OUTBOUND_ALLOW="127.0.0.1",
        SCHEDULER_ENCRYPTION_KEY=settings.SCHEDULER_ENCRYPTION_KEY,
        **extra,
    )


@pytest.mark.django_db(transaction=True)
def test_delivery_thread_sends_as_soon_as_the_outcome_commits(receiver: Receiver, user) -> None:
    thread = DeliveryThread()
    thread.start()
    try:
        time.sleep(0.3)  # listening
        run = due_run(subscribed_task(webhook_channel(receiver, user), ["succeeded"]))
        finish(run, "succeeded")
        finished_at = Run.objects.get(pk=run.pk).finished_at.timestamp()
        wait_for(lambda: receiver.accepted, timeout=5, interval=0.02)
    finally:
        thread.stop()
    assert receiver.accepted[0]["arrived"] - finished_at < 1.0
    assert Notification.objects.get().status == "sent"
    assert not thread.is_alive()


@pytest.mark.django_db(transaction=True)
def test_runnotifier_once_delivers_what_is_due(receiver: Receiver, user) -> None:
    finish(due_run(subscribed_task(webhook_channel(receiver, user), ["succeeded"])), "succeeded")
    call_command("runnotifier", "--once")
    assert len(receiver.accepted) == 1
    assert Notification.objects.get().status == "sent"


@pytest.mark.processes
def test_worker_process_delivers_within_seconds(processes, receiver: Receiver, user) -> None:
    run = due_run(subscribed_task(webhook_channel(receiver, user), ["succeeded"]))
    processes.start("runworker", "--concurrency", "1", env=role_env())
    wait_for(lambda: receiver.accepted, timeout=30, interval=0.05)
    run.refresh_from_db()
    [delivery] = receiver.accepted
    assert delivery["verified"] is True
    assert delivery["arrived"] - run.finished_at.timestamp() < 5
    wait_for(lambda: Notification.objects.filter(status="sent").exists(), timeout=5)


@pytest.mark.processes
@pytest.mark.parametrize("deliverer", [["runworker", "--concurrency", "1"], ["runnotifier"]])
def test_killed_worker_outcome_is_delivered_after_restart(
    processes,
    receiver: Receiver,
    user,
    deliverer: list[str],
) -> None:
    run = due_run(subscribed_task(webhook_channel(receiver, user), ["succeeded"]))
    # Delivery off: the worker records the outcome (and its outbox row) but never delivers.
    worker = processes.start(
        "runworker", "--concurrency", "1", env=role_env(NOTIFICATIONS_DELIVER_IN_WORKER="false")
    )
    wait_for(lambda: Notification.objects.filter(run=run).exists(), timeout=30, interval=0.05)
    worker.send_signal(signal.SIGKILL)
    worker.wait(timeout=10)
    assert Run.objects.get(pk=run.pk).status == "succeeded"
    assert receiver.deliveries == []
    assert Notification.objects.get().status == "pending"

    processes.start(*deliverer, env=role_env())

    wait_for(lambda: receiver.accepted, timeout=30, interval=0.05)
    wait_for(lambda: Notification.objects.filter(status="sent").exists(), timeout=10)
    time.sleep(0.5)
    assert len(receiver.deliveries) == 1
    assert receiver.deliveries[0]["verified"] is True
