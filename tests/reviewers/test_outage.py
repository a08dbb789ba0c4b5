"""After an interruption of its own passes (an outage, a failover) the reviewer holds rescues for
one full window, so workers that are alive get that long to beat on the new primary; without
one it rescues at once (tests/system/test_patroni_faults.py has the failover itself)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from reviewers.management.commands.runreviewer import Command
from reviewers.outage import RescueHold
from tasks.models import Run
from tasks.transitions.claim import claim_runs
from tests.factories import RunFactory, TaskFactory


def stale_running_run() -> Run:
    run = RunFactory(task=TaskFactory(max_attempts=3))
    [held] = claim_runs(worker="w-a", limit=1, prefetch_seconds=0, owner_cap=100)
    assert held.id == run.id
    Run.objects.filter(pk=run.pk).update(heartbeat_at=datetime.now(UTC) - timedelta(minutes=5))
    return run


def status(run: Run) -> str:
    return Run.objects.values_list("status", flat=True).get(pk=run.pk)


@pytest.mark.django_db
def test_passes_without_a_gap_rescue() -> None:
    run = stale_running_run()
    reviewer = Command()
    reviewer.hold.last_ok = time.monotonic() - 0.5  # the last pass half a second ago

    reviewer.run_once()

    assert status(run) == "scheduled"


@pytest.mark.django_db
def test_after_a_gap_rescues_wait_a_full_window() -> None:
    run = stale_running_run()
    reviewer = Command()
    reviewer.hold.last_ok = time.monotonic() - 30  # cut off for 30 s

    reviewer.run_once()
    assert status(run) == "running"
    reviewer.run_once()  # the next pass, right after: still held
    assert status(run) == "running"
    assert reviewer.hold.until - time.monotonic() > reviewer.hold.window - 5

    reviewer.hold.until = time.monotonic()  # the window has passed
    reviewer.run_once()
    assert status(run) == "scheduled"


@pytest.mark.django_db
def test_a_reviewer_starting_within_a_window_of_the_server_start_waits_for_the_rest() -> None:
    hold = RescueHold(window=10**9, interval=1.0)  # any server started within the window
    now = time.monotonic()
    hold.pass_started(now)
    assert hold.holding(now)

    hold = RescueHold(window=0.0, interval=1.0)
    hold.pass_started(now)
    assert not hold.holding(now)
