"""`python -m bench day` at toy size: a minute of the day on the Patroni rig, with its switchover,
its leader host crash and its role kills, loses no acknowledged create and records no occurrence
twice. Figures are not asserted (docs/benchmarks.md, "A production day, with faults", has the
full run's)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bench.patroni_cluster import can_run
from tests.conftest import ROOT, process_env

pytestmark = [
    pytest.mark.chaos,
    pytest.mark.processes,
    pytest.mark.skipif(not can_run(), reason="needs Debian's patroni, etcd and PostgreSQL 15"),
]


def test_a_short_day_with_faults_loses_nothing_and_records_nothing_twice() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench", "day", "--minutes", "1", "--tasks", "2000"],
        env=process_env(LOG_LEVEL="WARNING"),
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (day,) = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [f["fault"] for f in day["patroni_faults"]] == [
        "Patroni switchover",
        "leader host killed",
    ], day["patroni_errors"]
    assert sum(k["kills"] for k in day["role_kills"].values()) >= 1
    assert day["acknowledged_creates"] > 0
    # The printout ends with the verdict: each of the service's levels, met or not.
    assert "API p95 < 300 ms" in {row["level"] for row in day["verdict"]}
    # (one level, "answered within 2 s", is followed by a line of what was not, and why)
    tail = done.stdout.splitlines()[-len(day["verdict"]) - 2 :]
    assert any(f"of {len(day['verdict'])} service levels met" in line for line in tail)
    assert (day["lost"], day["recorded_twice"], day["occurrences_doubled"]) == (0, 0, 0)
    assert day["start_lateness"]["all"]["n"] > 0 and day["start_lateness"]["early"] == 0
    notes = day["notifications"]
    assert notes["queued"] > 0 and notes["delivered"] == notes["queued"]
    assert day["history_past_retention"]["after"] < day["history_past_retention"]["before"]
    assert day["role_exits_outside_kills"] == []
