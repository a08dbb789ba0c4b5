"""Rate limits with real worker processes: 15 due runs of a key limited to 5 starts per 10 seconds
across three workers: no 10-second window holds more than 5 starts, all 15 run once, runs held
say until when, and runs without the key start beside them. It takes about 20 s by nature."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tasks.models import RateKey, Run
from tests.conftest import process_env, wait_for
from tests.factories import RunFactory, TaskFactory, UserFactory

pytestmark = pytest.mark.processes

LIMIT, PER, COUNT = 5, 10, 15


def sleeping_runs(key: RateKey | None, count: int) -> list[Run]:
    """`count` due runs of short sleeping tasks naming `key`, due one millisecond apart."""
    now = datetime.now(UTC)
    owner = key.owner if key else UserFactory()
    runs = []
    for i in range(count):
        task = TaskFactory(
            owner=owner, payload={"name": "sleep", "args": {"seconds": 0.1}}, rate_key=key
        )
        at = now - timedelta(seconds=5) + timedelta(milliseconds=i)
        runs.append(RunFactory(task=task, scheduled_at=at, **task.requests))
    return runs


def succeeded(ids: list) -> bool:
    return Run.objects.filter(pk__in=ids, status="succeeded").count() == len(ids)


def test_no_window_holds_more_than_the_limit_across_workers(processes):
    key = RateKey.objects.create(
        owner=UserFactory(), name="crm-api", rate_limit=LIMIT, per_seconds=PER
    )
    ids = [r.pk for r in sleeping_runs(key, COUNT)]
    env = process_env()
    for _ in range(3):
        processes.start("runworker", "--concurrency", "4", env=env)
    processes.start("runreviewer", env=env)
    wait_for(
        lambda: Run.objects.filter(pk__in=ids, status="succeeded").count() >= LIMIT,
        timeout=30,
        details=processes.logs,
    )
    # The first window is full: the others wait, saying until when.
    held = wait_for(
        lambda: Run.objects.filter(pk__in=ids, status="waiting_for_resource").first(),
        timeout=10,
        details=processes.logs,
    )
    assert held.wait_reason.startswith(
        f"rate limit crm-api: {LIMIT} per {PER} s reached, next start at "
    ), held.wait_reason
    # Runs without the key, due now, do not wait for the window.
    beside = [r.pk for r in sleeping_runs(None, 4)]
    wait_for(lambda: succeeded(beside), timeout=15, details=processes.logs)
    first_start = min(
        Run.objects.filter(pk__in=ids).exclude(started_at=None).values_list("started_at", flat=True)
    )
    beside_starts = Run.objects.filter(pk__in=beside).values_list("started_at", flat=True)
    assert all(at < first_start + timedelta(seconds=PER) for at in beside_starts)

    wait_for(lambda: succeeded(ids), timeout=90, interval=0.2, details=processes.logs)
    runs = list(Run.objects.filter(pk__in=ids))
    assert all(r.attempt == 1 and r.wait_reason == "" for r in runs)
    starts = sorted(r.started_at for r in runs)
    # Any LIMIT + 1 consecutive starts span at least PER: no [t, t + PER) holds LIMIT + 1.
    for first, last in zip(starts, starts[LIMIT:], strict=False):
        assert last - first >= timedelta(seconds=PER), [s.isoformat() for s in starts]
    # Three windows, not more: the workers came back as each window freed.
    assert starts[-1] - starts[0] < timedelta(seconds=3 * PER)
