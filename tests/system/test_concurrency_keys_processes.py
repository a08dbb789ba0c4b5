"""Concurrency keys with real worker processes: three workers never run more than a key's limit
of its runs at once, start them in priority then due order, and run other keys' runs and unkeyed
runs beside them; a limit lowered at run time applies from the next claim."""

from __future__ import annotations

import itertools
import random
import signal
import time
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from tasks.models import Attempt, ConcurrencyKey, Run, Task
from tests.conftest import process_env, wait_for
from tests.factories import RunFactory, TaskFactory, UserFactory

pytestmark = pytest.mark.processes

SLEEP = 0.3  # each keyed run's length


def keyed_runs(key: ConcurrencyKey | None, count: int, *, priority=lambda i: 5) -> list[Run]:
    """`count` due runs of sleeping tasks naming `key`, due one millisecond apart, oldest first."""
    now = datetime.now(UTC)
    runs = []
    owner = key.owner if key else UserFactory()
    for i in range(count):
        task = TaskFactory(
            owner=owner,
            priority=priority(i),
            payload={"name": "sleep", "args": {"seconds": SLEEP}},
            concurrency_key=key,
        )
        at = now - timedelta(seconds=5) + timedelta(milliseconds=i)
        runs.append(RunFactory(task=task, scheduled_at=at, **task.requests))
    return runs


# A worker records a run finished and claims the next one in one statement (one transaction);
# the statement's starts are never before the finishes it records (claim.sql, `claimed`), so a
# hand-over needs no tolerance: a finish at the instant of the next start counts first.
HANDOVER = timedelta(0)


def most_at_once(runs: list[Run] | list[Attempt]) -> int:
    """The most runs whose [started_at, finished_at) intervals overlap at one instant."""
    edges = sorted(
        itertools.chain.from_iterable(
            ((r.started_at, 1), (r.finished_at - HANDOVER, -1)) for r in runs
        ),
        key=lambda edge: (edge[0], edge[1]),  # a finish before a start at the same instant
    )
    most = current = 0
    for _, step in edges:
        current += step
        most = max(most, current)
    return most


def succeeded(ids: list) -> bool:
    return Run.objects.filter(pk__in=ids, status="succeeded").count() == len(ids)


def test_three_workers_run_at_most_the_keys_limit_in_order_and_others_beside(processes):
    owner = UserFactory()
    db = ConcurrencyKey.objects.create(owner=owner, name="db", max_running=2)
    other = ConcurrencyKey.objects.create(owner=owner, name="other", max_running=4)
    keyed = keyed_runs(db, 20, priority=lambda i: (1, 5, 9)[i % 3])
    env = process_env()
    for _ in range(3):
        processes.start("runworker", "--concurrency", "4", env=env)
    ids = [r.pk for r in keyed]
    # Once the key is full, runs of another key and runs without one come due.
    wait_for(
        lambda: Run.objects.filter(pk__in=ids, status="running").exists(),
        timeout=30,
        details=processes.logs,
    )
    beside = keyed_runs(other, 4) + keyed_runs(None, 4)
    wait_for(lambda: succeeded(ids), timeout=60, interval=0.2, details=processes.logs)
    wait_for(lambda: succeeded([r.pk for r in beside]), timeout=30, details=processes.logs)

    runs = list(Run.objects.filter(pk__in=ids))
    assert all(r.attempt == 1 for r in runs)
    assert most_at_once(runs) == 2
    # Priority, then due order: the i-th run of that order starts after every run two or more
    # places ahead of it (two start together, in either order, a round trip apart).
    order = sorted(runs, key=lambda r: (-r.priority, r.execute_at))
    for i, later in enumerate(order):
        for earlier in order[: max(0, i - 1)]:
            assert earlier.started_at < later.started_at, (earlier.priority, later.priority)
    # The others did not wait for the key: they all started before the last keyed run did.
    last_keyed_start = max(r.started_at for r in runs)
    beside_runs = list(Run.objects.filter(pk__in=[r.pk for r in beside]))
    assert all(r.started_at < last_keyed_start for r in beside_runs)


def test_a_limit_lowered_at_run_time_applies_from_the_next_claim(processes):
    key = ConcurrencyKey.objects.create(owner=UserFactory(), name="db", max_running=4)
    runs = keyed_runs(key, 12)
    ids = [r.pk for r in runs]
    env = process_env()
    for _ in range(2):
        processes.start("runworker", "--concurrency", "4", env=env)
    wait_for(
        lambda: Run.objects.filter(pk__in=ids, status="running").count() == 4,
        timeout=30,
        interval=0.02,
        details=processes.logs,
    )
    ConcurrencyKey.objects.filter(pk=key.pk).update(max_running=1, declared=True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        changed_at = cursor.fetchone()[0]
    wait_for(lambda: succeeded(ids), timeout=60, interval=0.2, details=processes.logs)
    done = list(Run.objects.filter(pk__in=ids))
    # A run started more than a round trip after the change was claimed under the new limit.
    after = [r for r in done if r.started_at > changed_at + timedelta(seconds=0.1)]
    assert len(after) >= 6
    before = [r for r in done if r not in after]
    for run in after:
        assert all(b.finished_at - HANDOVER <= run.started_at for b in before), "beside older"
    assert most_at_once(after) == 1, sorted((r.started_at, r.finished_at, r.worker) for r in after)
    assert Task.objects.filter(concurrency_key=key).count() == 12


@pytest.mark.chaos
def test_killing_workers_never_lets_a_key_run_more_than_its_limit(processes, tmp_path):
    """Four workers, one SIGKILLed and started again each time six more runs have succeeded,
    and a reviewer that rescues the dead ones' runs: a killed worker's runs stay running (and
    hold their key's slots) until rescued, so the attempts never overlap more than the limit;
    every run succeeds once. Kills follow progress, not the clock: on a fast machine the runs
    would otherwise finish before enough kills."""
    records = tmp_path / "records"
    records.mkdir()
    env = process_env(
        SCHEDULER_HANDLER_MODULES="tests.handlers",
        TEST_RECORD_DIR=str(records),
        TASKS_HEARTBEAT_SECONDS="0.5",
        REVIEWERS_RESCUE_AFTER_SECONDS="2.0",
        REVIEWERS_INTERVAL_SECONDS="0.5",
        TASKS_START_SLA_SECONDS="600",
    )
    key = ConcurrencyKey.objects.create(owner=UserFactory(), name="db", max_running=2)
    now = datetime.now(UTC)
    ids = []
    for i in range(40):
        task = TaskFactory(
            owner=key.owner,
            payload={"name": "record", "args": {"sleep": 0.2}},
            max_attempts=20,
            concurrency_key=key,
        )
        at = now - timedelta(seconds=1) + timedelta(milliseconds=i)
        ids.append(RunFactory(task=task, scheduled_at=at, max_attempts=20, **task.requests).pk)
    processes.start("runreviewer", env=env)
    workers = [processes.start("runworker", "--concurrency", "2", env=env) for _ in range(4)]
    kills = 0
    rng = random.Random(11)
    deadline = time.monotonic() + 240
    killed_at = 0  # runs succeeded at the last kill
    while not succeeded(ids):
        assert time.monotonic() < deadline, "runs did not all finish:\n" + processes.logs()
        time.sleep(0.25)
        done = Run.objects.filter(pk__in=ids, status="succeeded").count()
        if done - killed_at >= 6 and len(ids) - done > 4:
            killed_at = done
            victim = rng.randrange(len(workers))
            workers[victim].send_signal(signal.SIGKILL)
            workers[victim].wait()
            kills += 1
            workers[victim] = processes.start("runworker", "--concurrency", "2", env=env)
    assert kills >= 3
    attempts = list(Attempt.objects.filter(run_id__in=ids))
    assert most_at_once(attempts) <= 2
    won = Counter(a.run_id for a in attempts if a.outcome == "succeeded")
    assert set(won.values()) == {1} and set(won) == set(ids)
