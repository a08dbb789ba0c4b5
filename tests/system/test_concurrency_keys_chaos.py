"""Chaos for concurrency keys: workers SIGKILLed every 2 s never let the history show more runs
of a key at once than its limit, with no tolerance for a hand-over (a slot's recorded finish is
never after the next recorded start), and lose or repeat no outcome. Run with `pytest -m chaos`."""

from __future__ import annotations

import itertools
import random
import signal
import time
from datetime import UTC, datetime, timedelta

import pytest

from tasks.models import Attempt, ConcurrencyKey, Run
from tests.conftest import process_env
from tests.factories import RunFactory, TaskFactory, UserFactory

pytestmark = [pytest.mark.chaos, pytest.mark.processes]

LIMIT = 2
RUNS = 30
TIMING = {
    "TASKS_HEARTBEAT_SECONDS": "0.5",
    "REVIEWERS_RESCUE_AFTER_SECONDS": "2.0",
    "REVIEWERS_INTERVAL_SECONDS": "0.5",
    "TASKS_START_SLA_SECONDS": "600",
}


def most_at_once(intervals: list[tuple[datetime, datetime]]) -> int:
    """The most [start, end) intervals that hold one instant (an end before a start at a tie)."""
    edges = sorted(
        itertools.chain.from_iterable(((start, 1), (end, -1)) for start, end in intervals),
        key=lambda edge: (edge[0], edge[1]),
    )
    most = current = 0
    for _, step in edges:
        current += step
        most = max(most, current)
    return most


def test_most_at_once_counts_a_hand_over_overlap() -> None:
    at = datetime(2030, 1, 1, tzinfo=UTC)
    ms = timedelta(milliseconds=1)
    assert most_at_once([(at, at + 10 * ms), (at + 10 * ms, at + 20 * ms)]) == 1
    assert most_at_once([(at, at + 10 * ms), (at + 9 * ms, at + 20 * ms)]) == 2


def test_killed_workers_never_let_a_key_run_more_than_its_limit(processes):
    key = ConcurrencyKey.objects.create(owner=UserFactory(), name="ck", max_running=LIMIT)
    now = datetime.now(UTC)
    ids = []
    for i in range(RUNS):
        task = TaskFactory(
            owner=key.owner,
            # 30 runs of 0.6 s through 2 slots: at least 9 s of work, several kills at one a 2 s.
            payload={"name": "sleep", "args": {"seconds": 0.6}},
            concurrency_key=key,
            max_attempts=20,
        )
        run = RunFactory(
            task=task,
            scheduled_at=now - timedelta(seconds=5) + timedelta(milliseconds=i),
            max_attempts=20,
            **task.requests,
        )
        ids.append(run.pk)
    env = process_env(**TIMING)
    processes.start("runreviewer", env=env)
    workers = [processes.start("runworker", "--concurrency", "2", env=env) for _ in range(4)]
    rng = random.Random(11)
    kills = 0
    deadline = time.monotonic() + 240
    while Run.objects.filter(pk__in=ids, status="succeeded").count() < RUNS:
        assert time.monotonic() < deadline, "runs did not all finish:\n" + processes.logs()
        time.sleep(2.0)
        if Run.objects.filter(pk__in=ids).exclude(status="succeeded").count() > LIMIT:
            victim = rng.randrange(len(workers))
            workers[victim].send_signal(signal.SIGKILL)
            workers[victim].wait()
            kills += 1
            workers[victim] = processes.start("runworker", "--concurrency", "2", env=env)

    assert kills >= 3, "the driver killed workers while runs were in flight"
    attempts = list(Attempt.objects.filter(run_id__in=ids))
    # Nothing lost, nothing recorded twice: one succeeded attempt per run.
    succeeded = [a.run_id for a in attempts if a.outcome == "succeeded"]
    assert sorted(succeeded) == sorted(ids)
    # Every attempt, rescued ones included, as recorded: never more than the limit at once.
    intervals = [(a.started_at, a.finished_at) for a in attempts if a.started_at]
    assert len(intervals) >= RUNS
    assert most_at_once(intervals) <= LIMIT
