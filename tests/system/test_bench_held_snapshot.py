"""`bench held_snapshot` groups pickups (started_at - scheduled_at) by the minute each run was
due, and overall."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bench.held_snapshot import pickup_figures

T0 = datetime(2026, 12, 5, 3, 0, tzinfo=UTC)


def run(due_after: float, pickup_ms: float | None) -> tuple[datetime, datetime | None]:
    due = T0 + timedelta(seconds=due_after)
    return due, None if pickup_ms is None else due + timedelta(milliseconds=pickup_ms)


def test_pickups_by_minute_due_and_overall() -> None:
    rows = [run(i * 0.5, 10.0 + i) for i in range(100)]  # minute 0: 10..109 ms
    rows += [run(60 + i * 0.5, 2000.0) for i in range(10)]  # minute 1: all 2 s
    rows += [run(61, None)]  # never started
    figures = pickup_figures(rows, t0=T0.timestamp())
    first, second = figures["per_minute"]
    assert (first["minute"], first["runs"], first["max_ms"]) == (0, 100, 109.0)
    assert first["p50_ms"] == 60.0 and first["p99_ms"] == 109.0
    assert (second["minute"], second["runs"], second["p99_ms"]) == (1, 10, 2000.0)
    assert figures["overall"]["runs"] == 110 and figures["overall"]["max_ms"] == 2000.0
    assert figures["overall"]["p50_ms"] == 65.0
    assert figures["unstarted"] == 1


def test_no_runs_gives_zeros_not_an_error() -> None:
    figures = pickup_figures([], t0=T0.timestamp())
    assert figures["per_minute"] == []
    assert figures["overall"] == {"runs": 0, "p50_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0}
