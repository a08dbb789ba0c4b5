"""tasks.worker.zombie_tracker against real process trees (no database)."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest

from tasks.worker.zombie_tracker import Activity, Tracker, tree_cpu_ticks


@pytest.fixture
def tree() -> Iterator[callable]:
    started: list[subprocess.Popen] = []

    def start(command: str) -> int:
        # `; true` keeps the shell as the root, the command running as its child.
        proc = subprocess.Popen(["sh", "-c", f"{command}; true"])
        started.append(proc)
        return proc.pid

    yield start
    for proc in started:
        subprocess.run(["pkill", "-KILL", "-P", str(proc.pid)], check=False)
        proc.kill()
        proc.wait()


def test_ticks_grow_under_a_busy_child_and_stay_under_a_sleeping_one(tree) -> None:
    busy = tree(f"{sys.executable} -c 'while True: pass'")
    idle = tree("sleep 30")
    time.sleep(0.3)
    before = tree_cpu_ticks([busy, idle])

    time.sleep(0.5)
    after = tree_cpu_ticks([busy, idle])

    assert after[busy] > before[busy]
    assert after[idle] == before[idle]
    assert tree_cpu_ticks([2**22 + 12345]) == {}  # no such process: nothing to report


def test_tracker_reports_a_quiet_run_once_and_again_when_it_stirs(tree) -> None:
    activity = Activity(pid=tree("sleep 30"), output_at=100.0)
    tracker = Tracker(after=10)

    assert tracker.check({"r": activity}, now=105.0) == ([], [])
    assert tracker.check({"r": activity}, now=111.0) == ([("r", 11.0)], [])
    assert tracker.check({"r": activity}, now=120.0) == ([], [])  # already reported
    activity.output_at = 121.0  # it printed something
    assert tracker.check({"r": activity}, now=122.0) == ([], ["r"])
    assert tracker.check({}, now=123.0) == ([], [])
    assert tracker.seen == {}


def test_a_job_is_quiet_by_its_output_and_status_alone() -> None:
    """A Job has no process tree here: its follower moves `output_at` on output or a status
    change, and the tracker judges by that alone."""
    tracker = Tracker(after=10)
    key = (uuid.uuid4(), 1)
    job = Activity(output_at=100.0, job="sched-x-1")
    not_made = Activity(output_at=0.0)  # neither a process nor a Job yet: not judged

    assert tracker.check({key: job, (uuid.uuid4(), 1): not_made}, now=105.0) == ([], [])
    assert tracker.check({key: job}, now=111.0) == ([(key, 11.0)], [])
    assert tracker.check({key: job}, now=120.0) == ([], [])  # reported once
    job.output_at = 119.0  # it wrote again
    assert tracker.check({key: job}, now=120.0) == ([], [key])
    assert job.quiet_means == "no log output and no Job status change"
    assert Activity(pid=1).quiet_means == "no CPU time and no output"
