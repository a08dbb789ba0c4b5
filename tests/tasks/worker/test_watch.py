"""The worker's watch thread survives an unexpected error in a pass: logged, counted, goes on."""

from __future__ import annotations

import threading
from uuid import UUID

import pytest

from tasks.models import Process, RunCounter
from tasks.worker.watch import Watch
from tasks.worker.zombie_tracker import Activity, RunKey
from tests.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


class HoldsNothingFailingOnce:
    """What a worker holding no runs shows the watch, except that its first answer of which
    runs to renew raises (as a bug met once would)."""

    def __init__(self) -> None:
        self.asked = 0

    def claim_mark(self) -> int:
        return 0

    def held_before(self, mark: int) -> set[UUID]:
        return set()

    def unrecorded(self) -> set[UUID]:
        self.asked += 1
        if self.asked == 1:
            raise RuntimeError("a bug met by one pass")
        return set()

    def lose(self, run_ids: set[UUID], *, reason: str) -> None:
        raise AssertionError("nothing is held")

    def executing(self) -> dict[RunKey, Activity]:
        return {}

    def stop_run(self, run_id: UUID, *, reason: str) -> None:
        raise AssertionError("nothing is held")


def test_a_failing_pass_is_logged_counted_and_the_heartbeats_go_on(caplog) -> None:
    runs = HoldsNothingFailingOnce()
    watch = Watch(name="worker:test-watch", concurrency=1, runs=runs, wake=threading.Event())
    watch.start()
    try:
        wait_for(lambda: Process.objects.filter(name="worker:test-watch").exists(), timeout=30)
        assert watch.is_alive() and runs.asked >= 2
    finally:
        watch.stop()

    counted = RunCounter.objects.filter(metric="loop_error", kind="worker")
    assert sum(counted.values_list("value", flat=True)) == 1
    [logged] = [r for r in caplog.records if r.name == "tasks.worker.watch" and r.exc_info]
    assert logged.levelname == "ERROR" and "a bug met by one pass" in str(logged.exc_info[1])
