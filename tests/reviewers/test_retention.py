"""Retention: only finished runs past their status's window go, in batches that never block."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.test import override_settings
from django.utils import timezone

from reviewers import retention
from tasks.models import Attempt, Process, Run
from tasks.transitions import claim
from tests.factories import RunFactory, TaskFactory

DAY = timedelta(days=1)


def finished(status: str, *, days_ago: float, **fields: object) -> Run:
    at = timezone.now() - days_ago * DAY
    started = at if status in ("succeeded", "failed") else None
    run = RunFactory(
        status=status,
        scheduled_at=at - timedelta(minutes=1),
        finished_at=at,
        started_at=started,
        **fields,
    )
    Attempt.objects.create(run=run, number=1, finished_at=at, outcome="succeeded")
    return run


def test_prunes_only_finished_runs_past_their_retention(db):
    task = TaskFactory()
    old_ok = finished("succeeded", days_ago=40, task=task)
    old_failed = finished("failed", days_ago=40, task=task)
    recent_ok = finished("succeeded", days_ago=5, task=task)
    long_ago = timezone.now() - 400 * DAY
    # Still needed whatever their age: waiting, running, retrying.
    scheduled = RunFactory(task=task, scheduled_at=long_ago, execute_at=long_ago)
    running = RunFactory(
        task=task,
        status="running",
        worker="w",
        scheduled_at=long_ago + DAY,
        started_at=long_ago,
        heartbeat_at=timezone.now(),
    )
    waiting = RunFactory(task=task, status="waiting_for_resource", scheduled_at=long_ago + 2 * DAY)

    pruned = retention.prune_finished_runs(
        retention_days={"succeeded": 30, "failed": 90, "cancelled": 30, "skipped": 30}, batch=100
    )

    assert pruned == {"succeeded": 1, "failed": 0, "cancelled": 0, "skipped": 0}
    left = set(Run.objects.values_list("id", flat=True))
    assert old_ok.id not in left
    assert {old_failed.id, recent_ok.id, scheduled.id, running.id, waiting.id} <= left
    assert not Attempt.objects.filter(run_id=old_ok.id).exists()  # attempts go with the run
    assert Attempt.objects.filter(run_id=recent_ok.id).exists()


def test_prunes_in_bounded_batches_oldest_first(db):
    task = TaskFactory()
    runs = [finished("skipped", days_ago=50 + i, task=task) for i in range(5)]
    assert retention.prune_batch(status="skipped", older_than_days=30, batch=2) == 2
    left = set(Run.objects.values_list("id", flat=True))
    assert {r.id for r in runs[3:]}.isdisjoint(left)  # the two oldest went first
    assert retention.prune_batch(status="skipped", older_than_days=30, batch=2) == 2
    assert retention.prune_batch(status="skipped", older_than_days=30, batch=2) == 1
    assert retention.prune_batch(status="skipped", older_than_days=30, batch=2) == 0


def test_refuses_to_prune_unfinished_statuses(db):
    with pytest.raises(ValueError):
        retention.prune_batch(status="scheduled", older_than_days=1, batch=10)


def test_prunes_notifications_with_their_run(db):
    from notifications.models import Channel, Notification

    run = finished("succeeded", days_ago=40)
    channel = Channel.objects.create(owner=run.owner, kind="email", config={"address": "a@b.c"})
    Notification.objects.create(
        channel=channel,
        run=run,
        task=run.task,
        attempt=1,
        event="succeeded",
        retry_until=timezone.now(),
    )
    assert retention.prune_batch(status="succeeded", older_than_days=30, batch=10) == 1
    assert not Notification.objects.exists()


@pytest.mark.concurrency
@pytest.mark.django_db(transaction=True)
def test_a_prune_batch_holding_its_locks_neither_blocks_a_claim_nor_another_pruner():
    task = TaskFactory()
    old = [finished("succeeded", days_ago=40, task=task) for _ in range(4)]
    due = RunFactory(task=task, execute_at=timezone.now() - timedelta(seconds=1))
    locked, release, result = threading.Event(), threading.Event(), {}

    def prune_and_hold() -> None:
        try:
            with transaction.atomic():
                result["pruned"] = retention.prune_batch(
                    status="succeeded", older_than_days=30, batch=2
                )
                locked.set()
                release.wait(10)  # the batch's row locks are held until this commits
        finally:
            connection.close()

    holder = threading.Thread(target=prune_and_hold)
    holder.start()
    try:
        assert locked.wait(10)
        with connection.cursor() as cursor:  # fail loudly instead of hanging if it ever blocks
            cursor.execute("SET lock_timeout = '2s'")
        started = time.monotonic()
        claimed = claim.claim_runs(worker="w1", limit=5, prefetch_seconds=0, owner_cap=0)
        claim_seconds = time.monotonic() - started
        # A second reviewer skips the locked rows and takes the others at once.
        started = time.monotonic()
        second = retention.prune_batch(status="succeeded", older_than_days=30, batch=10)
        prune_seconds = time.monotonic() - started
    finally:
        release.set()
        holder.join(10)
    assert [run.id for run in claimed] == [due.id]
    assert claim_seconds < 0.5, claim_seconds
    assert (result["pruned"], second) == (2, 2) and prune_seconds < 0.5
    assert not Run.objects.filter(id__in=[r.id for r in old]).exists()


# The daemon loop closes connections between passes: a transactional test, as in production.
@pytest.mark.django_db(transaction=True)
def test_reviewer_pass_prunes_processes_and_keeps_ten_years_by_default():
    ancient = finished("succeeded", days_ago=3000)
    now = timezone.now()
    Process.objects.create(
        name="gone",
        role="worker",
        host="h",
        pid=1,
        started_at=now - 30 * DAY,
        last_seen_at=now - 30 * DAY,
    )
    call_command("runreviewer", "--once")
    assert Run.objects.filter(pk=ancient.pk).exists()  # 3000 days < the default 3650
    assert not Process.objects.filter(name="gone").exists()
    days = {"succeeded": 1000, "failed": 3650, "cancelled": 3650, "skipped": 3650}
    with override_settings(REVIEWERS_RETENTION_DAYS_BY_STATUS=days):
        call_command("runreviewer", "--once")
    assert not Run.objects.filter(pk=ancient.pk).exists()
