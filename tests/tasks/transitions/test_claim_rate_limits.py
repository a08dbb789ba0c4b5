"""Rate limits in the claim (tasks/sql/claim.sql, `rate_ctes`): at most a key's limit of starts
in any window of its length (an exact sliding window, also under concurrent claims), strict
order within a key, and no rate key holding back other runs."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from tasks import outbox
from tasks.models import ConcurrencyKey, RateKey, Run, Task
from tasks.transitions import claim, limits
from tests.conftest import database_url
from tests.factories import RunFactory, TaskFactory, UserFactory

pytestmark = pytest.mark.django_db

REASON = "rate limit crm-api: 3 per 60 s reached, next start at "


def rate_task(key: RateKey | None, priority: int = 5, **fields) -> Task:
    task = TaskFactory(priority=priority, owner=key.owner if key else UserFactory(), **fields)
    task.rate_key = key
    task.save()
    return task


def due(task: Task, *, ago: float = 1.0, now: datetime | None = None) -> Run:
    # `now` for runs made in a loop `ago` apart by less than the clock's step: read per run, two
    # could fall on one scheduled_at (unique per task).
    at = (now or datetime.now(UTC)) - timedelta(seconds=ago)
    return RunFactory(task=task, scheduled_at=at, **task.requests)


def take(limit: int = 8, worker: str = "w", prefetch: float = 0) -> claim.ClaimedRuns:
    return claim.claim_runs(worker=worker, limit=limit, prefetch_seconds=prefetch, owner_cap=0)


def age_log(key: RateKey, seconds: float) -> None:
    """As if `seconds` had passed for the key's window: its starts and held_until move back."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE tasks_ratekey SET starts = ARRAY(SELECT s - make_interval(secs => %s)"
            " FROM unnest(starts) AS s ORDER BY s),"
            " held_until = held_until - make_interval(secs => %s) WHERE id = %s",
            [seconds, seconds, key.pk],
        )


def crm(limit: int = 3, per: int = 60) -> RateKey:
    return RateKey.objects.create(
        owner=UserFactory(), name="crm-api", rate_limit=limit, per_seconds=per
    )


def test_a_key_starts_at_most_its_limit_per_window_then_holds_the_rest_saying_until_when():
    key = crm()
    task = rate_task(key)
    runs = [due(task, ago=10 - i) for i in range(5)]
    claimed = take()
    assert [r.id for r in claimed] == [r.pk for r in runs[:3]]  # due order
    key.refresh_from_db()
    started = [Run.objects.get(pk=r.pk).started_at for r in runs[:3]]
    # The log holds the starts the runs carry: one instant, the claim's admission.
    assert key.starts == started and len(set(started)) == 1
    assert key.held_until == started[0] + timedelta(seconds=60)
    held = Run.objects.get(pk=runs[3].pk)
    assert held.status == "waiting_for_resource"
    assert (
        held.wait_reason
        == REASON + key.held_until.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    )
    assert claimed.rate_wait is not None and 59 < claimed.rate_wait <= 60
    # Full: the next claim skips the key's runs and still says when to come back.
    again = take()
    assert list(again) == [] and again.rate_wait is not None and 58 < again.rate_wait <= 60
    age_log(key, 60)  # the window has moved past the three starts
    assert [r.id for r in take()] == [runs[3].pk, runs[4].pk]
    assert Run.objects.get(pk=runs[3].pk).wait_reason == ""


def test_the_window_slides_it_does_not_reset():
    """Starts at t-50 and t-5 (limit 3 per 60): one more now, then none until t-50 leaves the
    window; a fixed window or a refilled bucket would admit more."""
    key = crm()
    task = rate_task(key)
    for i in range(6):
        due(task, ago=100 + i)
    assert len(take(limit=1)) == 1
    age_log(key, 45)
    assert len(take(limit=1)) == 1
    age_log(key, 5)  # starts now 50 s and 5 s ago
    assert len(take()) == 1
    assert list(take()) == []
    age_log(key, 9.5)  # 59.5 s, 14.5 s and 9.5 s ago: still three in the window
    assert list(take()) == []
    age_log(key, 0.6)  # the oldest left it
    assert len(take()) == 1


def test_a_held_rate_key_does_not_hold_back_other_keys_or_unlimited_runs():
    owner = UserFactory()
    full = RateKey.objects.create(owner=owner, name="crm-api", rate_limit=1, per_seconds=60)
    other = RateKey.objects.create(owner=owner, name="mail", rate_limit=5, per_seconds=60)
    # Many due runs of the limited key at the top priority, older than everything else.
    limited = [due(rate_task(full, priority=9), ago=60 + i) for i in range(12)]
    assert len(take(limit=1)) == 1
    # Within the same claim too: the key's held runs fill the candidates, the others still go.
    rest = [due(rate_task(other, priority=9)), due(rate_task(None, priority=1))]
    claimed = take(limit=4)
    assert {r.id for r in claimed} == {r.pk for r in rest}
    assert Run.objects.filter(pk__in=[r.pk for r in limited], status="running").count() == 1


def test_strict_priority_within_a_key():
    key = crm(limit=2)
    low, high = rate_task(key, priority=1), rate_task(key, priority=9)
    old_low = due(low, ago=30)
    highs = [due(high, ago=1), due(high, ago=2)]
    assert {r.id for r in take(limit=1)} == {highs[1].pk}
    assert {r.id for r in take(limit=8)} == {highs[0].pk}
    assert Run.objects.get(pk=old_low.pk).status == "waiting_for_resource"


def test_a_run_with_a_concurrency_key_and_a_rate_key_is_held_by_either():
    owner = UserFactory()
    conc = ConcurrencyKey.objects.create(owner=owner, name="db", max_running=1)
    rate = RateKey.objects.create(owner=owner, name="crm-api", rate_limit=5, per_seconds=60)
    task = TaskFactory(owner=owner)
    task.concurrency_key, task.rate_key = conc, rate
    task.save()
    runs = [due(task, ago=5 - i) for i in range(3)]
    assert [r.id for r in take()] == [runs[0].pk]
    rate.refresh_from_db()
    assert len(rate.starts) == 1  # only the claimed start is logged, not the held ones
    Run.objects.filter(pk=runs[0].pk).update(status="succeeded", finished_at=datetime.now(UTC))
    assert [r.id for r in take()] == [runs[1].pk]
    rate.refresh_from_db()
    assert len(rate.starts) == 2


def test_a_lower_limit_applies_at_the_next_claim_and_a_higher_one_frees_the_key():
    key = crm(limit=4)
    task = rate_task(key)
    for i in range(8):
        due(task, ago=10 + i)
    assert len(take(limit=2)) == 2
    limits.set_limits(limits.RATE, key, {"limit": 2, "per": 60})
    assert list(take()) == []  # two started in the window: the limit is two now
    key.refresh_from_db()
    assert key.held_until is not None and key.declared
    limits.set_limits(limits.RATE, key, {"limit": 3, "per": 60})
    key.refresh_from_db()
    assert key.held_until is None
    assert len(take()) == 1


def test_runs_not_due_yet_are_not_started_ahead_and_the_worker_is_told_when_they_are():
    key = crm()
    task = rate_task(key)
    soon = RunFactory(
        task=task, scheduled_at=datetime.now(UTC) + timedelta(seconds=0.4), **task.requests
    )
    claimed = take(prefetch=0.5)
    assert list(claimed) == [] and claimed.rate_wait is not None and 0 < claimed.rate_wait <= 0.4
    assert Run.objects.get(pk=soon.pk).status == "scheduled"


def test_due_runs_of_a_full_key_the_claim_skipped_say_why_they_wait():
    key = crm(limit=1)
    task = rate_task(key)
    first = due(task, ago=5)
    assert [r.id for r in take(limit=1)] == [first.pk]
    later = [due(task, ago=1), due(task, ago=2)]  # due while the key is full: no candidates
    assert list(take()) == []
    assert {Run.objects.get(pk=r.pk).status for r in later} == {"scheduled"}
    assert limits.hold_waiting_runs(limits.RATE) == 2
    assert limits.hold_waiting_runs(limits.RATE) == 0  # written once
    key.refresh_from_db()
    for run in later:
        run.refresh_from_db()
        assert run.status == "waiting_for_resource"
        assert run.wait_reason.startswith("rate limit crm-api: 1 per 60 s reached, next start at ")
    age_log(key, 60)
    assert limits.hold_waiting_runs(limits.RATE) == 0  # the window is free: nothing to hold
    [started] = take()
    assert started.id == later[1].pk
    assert Run.objects.get(pk=started.id).wait_reason == ""


def test_the_finish_keeps_the_start_the_key_admitted():
    """The worker's own start reading comes after the claim's commit; the run keeps its key's
    start (the one its log holds), the attempt records the worker's."""
    key = crm()
    run = due(rate_task(key))
    assert [r.id for r in take()] == [run.pk]
    admitted = Run.objects.get(pk=run.pk).started_at
    later = admitted + timedelta(seconds=0.25)
    outcome = claim.Outcome(
        run_id=run.pk, attempt=1, status="succeeded", attempt_outcome="succeeded", started_at=later
    )
    claim.record_outcomes(worker="w", outcomes=[outcome])
    run.refresh_from_db()
    assert run.status == "succeeded" and run.started_at == admitted
    assert run.attempts.get().started_at == later


def _claim_params(worker: str, limit: int) -> dict:
    return {
        "worker": worker,
        "limit": limit,
        "prefetch": 0.0,
        "owner_cap": 0,
        **claim.NO_FLOOR.params(),
        "window": settings.NOTIFICATIONS_RETRY_WINDOW_SECONDS,
        "channel": outbox.NOTIFICATION_CHANNEL,
        **claim.NO_LIMIT.params(),
    }


@pytest.mark.django_db(transaction=True)
def test_concurrent_claimers_never_start_more_than_the_limit_in_any_window():
    """Six threads, each on its own connection, claim as fast as they can (the claim and the
    record-and-claim cycle alike) until 12 runs of a key limited to 3 per second have started:
    sorted by started_at, any 4 consecutive starts span at least one second."""
    limit, per, count = 3, 1, 12
    key = RateKey.objects.create(
        owner=UserFactory(), name="crm-api", rate_limit=limit, per_seconds=per
    )
    task = rate_task(key)
    now = datetime.now(UTC)
    runs = [due(task, ago=1 + i * 0.001, now=now) for i in range(count)]
    unlimited = [due(rate_task(None)) for _ in range(6)]
    conninfo, stop, errors = database_url(), threading.Event(), []

    def claimer(n: int) -> None:
        sql = claim.claim_sql(4) if n % 2 else claim.cycle_sql(4)
        params = _claim_params(f"t{n}", 2)
        if n % 2 == 0:
            params.update(claim._finish_params(f"t{n}", []))
        try:
            with psycopg.connect(conninfo, autocommit=True) as db:
                while not stop.is_set():
                    db.execute(sql, params).fetchall()
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
            stop.set()

    threads = [threading.Thread(target=claimer, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    try:
        # count / limit windows take about 4 s; a loaded machine is given a minute.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if (
                errors
                or Run.objects.filter(pk__in=[r.pk for r in runs], status="running").count()
                == count
            ):
                break
            threading.Event().wait(0.01)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert not errors, errors
    starts = sorted(
        Run.objects.filter(pk__in=[r.pk for r in runs]).values_list("started_at", flat=True)
    )
    assert len(starts) == count and None not in starts
    for first, last in zip(starts, starts[limit:], strict=False):
        assert last - first >= timedelta(seconds=per), starts
    assert Run.objects.filter(pk__in=[r.pk for r in unlimited], status="running").count() == 6
    key.refresh_from_db()
    assert key.starts == starts[-limit:]
