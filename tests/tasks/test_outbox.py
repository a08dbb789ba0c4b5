"""The outbox: notification rows written by the transactions that record runs' outcomes."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.models import Team
from notifications.models import Notification
from tasks import outbox, schedules
from tasks.models import Run
from tasks.transitions import claim, overlap, plan
from tasks.transitions.rescue import flag_starved_runs, rescue_stuck_runs
from tasks.worker.worker import Worker
from tests.factories import RunFactory, TaskFactory, UserFactory
from tests.notifications.conftest import ChannelFactory, due_run, finish, subscribed_task
from tests.tasks.support import running_run

pytestmark = pytest.mark.django_db


def events_of(run: Run) -> list[tuple[int, str]]:
    return list(
        Notification.objects.filter(run=run)
        .order_by("attempt", "event")
        .values_list("attempt", "event")
    )


def test_success_enqueues_one_pending_row_per_subscribed_channel(user) -> None:
    channel = ChannelFactory(owner=user)
    task = subscribed_task(channel, ["succeeded", "failed"])
    run = due_run(task)

    finish(run, "succeeded")

    [row] = Notification.objects.all()
    assert (row.channel_id, row.run_id, row.task_id) == (channel.id, run.id, task.id)
    assert (row.attempt, row.event, row.status, row.attempts) == (1, "succeeded", "pending", 0)
    assert row.next_attempt_at <= timezone.now()
    assert row.retry_until - row.created_at == timedelta(hours=1)
    assert row.id.version == 7


def test_failed_attempt_with_retries_left_is_failed_then_exhausted(user) -> None:
    channel = ChannelFactory(owner=user)
    task = subscribed_task(channel, ["failed", "retries_exhausted"], max_attempts=2)
    run = due_run(task, max_attempts=2)

    finish(run, "scheduled")  # attempt 1 failed, retry due at once (retry_in=0)
    finish(run, "failed")  # attempt 2 failed, none left

    assert events_of(run) == [(1, "failed"), (2, "retries_exhausted")]


def test_real_worker_outcomes_enqueue_each_event(user) -> None:
    channel = ChannelFactory(owner=user)
    events = ["succeeded", "failed", "retries_exhausted"]
    ok = subscribed_task(channel, events, name="ok")
    bad = subscribed_task(
        channel,
        events,
        name="bad",
        payload={"name": "fail"},
        max_attempts=2,
        retry_backoff_base=0,
        retry_backoff_cap=0,
    )
    ok_run, bad_run = due_run(ok), due_run(bad, max_attempts=2)
    worker = Worker(concurrency=2)
    try:
        deadline = time.monotonic() + 15
        while Run.objects.exclude(status__in=["succeeded", "failed"]).exists():
            assert time.monotonic() < deadline, "the worker did not finish both runs"
            worker.run_once()
            time.sleep(0.02)
    finally:
        worker.pool.shutdown(wait=True)

    assert events_of(ok_run) == [(1, "succeeded")]
    assert events_of(bad_run) == [(1, "failed"), (2, "retries_exhausted")]


def test_unsubscribed_events_and_cancellations_enqueue_nothing(user) -> None:
    channel = ChannelFactory(owner=user)
    task = subscribed_task(channel, ["retries_exhausted"])
    finish(due_run(task), "succeeded")
    assert not Notification.objects.exists()
    with CaptureQueriesContext(connection) as queries:
        finish(due_run(task, scheduled_at=timezone.now()), "cancelled")
    assert not any("notifications_notification" in q["sql"] for q in queries.captured_queries)


def test_enqueue_costs_one_statement_when_nobody_subscribes() -> None:
    runs = [
        due_run(TaskFactory(), scheduled_at=timezone.now() - timedelta(seconds=i + 1))
        for i in range(3)
    ]
    with CaptureQueriesContext(connection) as queries:
        claimed = claim.claim_runs(worker="w", limit=3, prefetch_seconds=0, owner_cap=0)
        claim.record_outcomes(
            worker="w",
            outcomes=[
                claim.Outcome(
                    run_id=c.id,
                    attempt=1,
                    status="succeeded",
                    attempt_outcome="succeeded",
                    started_at=None,
                )
                for c in claimed
            ],
        )
    # The claim statement names notifications_enqueue too, for runs it records missed,
    # and calls it only for those: none here.
    finishing = [q for q in queries.captured_queries if "missed_notified" not in q["sql"]]
    outbox_queries = [q for q in finishing if "notifications_" in q["sql"]]
    assert len(outbox_queries) == 1
    assert "notifications_enqueue" in outbox_queries[0]["sql"]
    assert not Notification.objects.exists()
    assert Run.objects.filter(id__in=[r.id for r in runs], status="succeeded").count() == 3


def test_enqueue_twice_inserts_once(user) -> None:
    channel = ChannelFactory(owner=user, all_tasks_events=["succeeded"])
    task = subscribed_task(channel, ["succeeded"])  # the same channel twice over
    run = due_run(task)
    finish(run, "succeeded")

    again = outbox.enqueue(None, events=[(run.id, task.id, 1, "succeeded")])

    assert again == 0
    assert Notification.objects.count() == 1


def test_all_tasks_channels_receive_every_task_of_their_owner(user) -> None:
    everything = ChannelFactory(owner=user, all_tasks_events=["succeeded", "retries_exhausted"])
    ChannelFactory(owner=user, all_tasks_events=[])
    ChannelFactory(all_tasks_events=["succeeded"])  # someone else's
    run = due_run(TaskFactory(owner=user))

    finish(run, "succeeded")

    assert list(Notification.objects.values_list("channel_id", "event")) == [
        (everything.id, "succeeded")
    ]


def test_another_users_channel_in_notify_receives_nothing(user) -> None:
    stranger = ChannelFactory(owner=UserFactory())
    task = TaskFactory(
        owner=user,
        notify=[
            {"channel": str(stranger.id), "events": ["succeeded"]},
            {"channel": "not-a-uuid", "events": ["succeeded"]},
            "garbage",
        ],
    )
    finish(due_run(task), "succeeded")
    assert not Notification.objects.exists()


def test_a_teams_task_notifies_the_teams_channels_whoever_made_them(user) -> None:
    data, web = Team.objects.create(slug="data"), Team.objects.create(slug="web")
    colleague = UserFactory()
    named = ChannelFactory(owner=colleague, team=data)  # another member's channel of the team
    every = ChannelFactory(owner=colleague, team=data, all_tasks_events=["succeeded"])
    # Not the task's: the owner's own channel, their channel of another team, another team's.
    ChannelFactory(owner=user, all_tasks_events=["succeeded"])
    ChannelFactory(owner=user, team=web, all_tasks_events=["succeeded"])
    elsewhere = ChannelFactory(owner=user, team=web)
    notify = [{"channel": str(c.id), "events": ["succeeded"]} for c in (named, elsewhere)]
    task = TaskFactory(owner=user, team=data, notify=notify)

    finish(due_run(task), "succeeded")

    assert set(Notification.objects.values_list("channel_id", flat=True)) == {named.id, every.id}


def test_a_personal_task_notifies_only_its_owners_channels_of_no_team(user) -> None:
    data = Team.objects.create(slug="data")
    mine = ChannelFactory(owner=user, all_tasks_events=["succeeded"])
    teams = ChannelFactory(owner=user, team=data, all_tasks_events=["succeeded"])
    task = TaskFactory(owner=user, notify=[{"channel": str(teams.id), "events": ["succeeded"]}])

    finish(due_run(task), "succeeded")

    assert list(Notification.objects.values_list("channel_id", flat=True)) == [mine.id]


def test_a_rolled_back_outcome_leaves_no_notification(user) -> None:
    channel = ChannelFactory(owner=user)
    run = due_run(subscribed_task(channel, ["succeeded"]))
    from django.db import transaction

    with pytest.raises(RuntimeError), transaction.atomic():
        finish(run, "succeeded")
        assert Notification.objects.count() == 1
        raise RuntimeError("the process died before commit")
    assert not Notification.objects.exists()


def test_misfire_skipped_occurrences_are_missed(user) -> None:
    channel = ChannelFactory(owner=user)
    now = timezone.now().replace(microsecond=0)
    start = now - timedelta(minutes=10)
    schedule = schedules.normalize(
        {"type": "interval", "every": 60, "misfire": "skip", "start_at": start.isoformat()},
        now=start,
    )
    task = subscribed_task(
        channel, ["missed"], schedule=schedule, schedule_type="interval", next_unplanned_at=start
    )

    result = plan.plan_task(task, now=now, horizon=now + timedelta(seconds=30))

    skipped = Run.objects.filter(task=task, status="skipped")
    assert result.skipped == skipped.count() > 0
    assert Notification.objects.filter(event="missed").count() == skipped.count()
    assert set(Notification.objects.values_list("attempt", flat=True)) == {0}


def test_rescue_and_starvation_are_stuck(user) -> None:
    channel = ChannelFactory(owner=user)
    task = subscribed_task(channel, ["stuck", "retries_exhausted"], max_attempts=3)
    stale = timezone.now() - timedelta(minutes=5)
    spent = running_run(task, heartbeat_at=stale, attempt=3, max_attempts=3)
    retried = running_run(
        task, heartbeat_at=stale, attempt=1, max_attempts=3, scheduled_at=stale, worker="w-2"
    )
    starved = RunFactory(task=task, scheduled_at=stale - timedelta(minutes=1), max_attempts=3)

    assert rescue_stuck_runs(after_seconds=60).rescued == 1
    assert flag_starved_runs(sla_seconds=10) >= 1

    assert events_of(spent) == [(3, "retries_exhausted"), (3, "stuck")]
    assert events_of(starved) == [(0, "stuck")]
    assert events_of(retried) == [(1, "stuck")]


def test_overlap_skipped_occurrence_is_missed(user) -> None:

    channel = ChannelFactory(owner=user)
    schedule = {"type": "once", "run_at": "2030-01-01T00:00:00Z", "overlap": "skip"}
    task = subscribed_task(channel, ["missed"], schedule=schedule)
    running_run(task, scheduled_at=timezone.now() - timedelta(minutes=1), worker="w-other")
    run = due_run(task)

    claimed = claim.claim_runs(worker="w", limit=5, prefetch_seconds=0, owner_cap=0)
    assert overlap.resolve_overlaps(worker="w", claimed=claimed) == []

    assert Run.objects.get(pk=run.pk).status == "skipped"
    assert events_of(run) == [(0, "missed")]


def test_an_occurrence_missed_at_claim_time_is_missed(user) -> None:
    from tasks.transitions import claim

    channel = ChannelFactory(owner=user)
    schedule = {"type": "interval", "every": 60, "misfire": "skip"}
    task = subscribed_task(channel, ["missed"], schedule=schedule, schedule_type="interval")
    late = timezone.now() - timedelta(minutes=5)  # planned on time, never claimed since
    run = due_run(task, scheduled_at=late, missed_after=late + timedelta(seconds=60))

    assert claim.claim_runs(worker="w", limit=5, prefetch_seconds=0, owner_cap=0) == []

    assert Run.objects.get(pk=run.pk).status == "skipped"
    assert events_of(run) == [(0, "missed")]
