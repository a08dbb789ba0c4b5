"""Helpers of the recurring-schedule tests: tasks left to the schedulers, lateness."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime
from itertools import takewhile
from pathlib import Path
from typing import Any

from tasks import schedules
from tasks.models import Run, Task


def iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def recurring_task(owner: Any, raw: dict, *, now: datetime, **fields: Any) -> Task:
    """A task stored as the API stores it, with nothing planned: the schedulers plan all of it.

    `next_unplanned_at` is the schedule's first fire time, even a past one, which is how a task
    looks to a scheduler that comes back after an outage.
    """
    schedule = schedules.normalize(raw, now=now)
    values = {
        "owner": owner,
        "kind": "handler",
        "payload": {"name": "record", "args": {}},
        "schedule": schedule,
        "schedule_type": schedule["type"],
        "next_unplanned_at": next(iter(schedules.fire_times(schedule, after=None)), None),
    }
    return Task.objects.create(**(values | fields))


def fire_times_until(schedule: dict, end: datetime) -> list[datetime]:
    """Every fire time from the schedule's beginning up to `end` (inclusive)."""
    return list(takewhile(lambda at: at <= end, schedules.fire_times(schedule, after=None)))


def recorded_keys(folder: Path) -> Counter[str]:
    """How often the `record` handler executed each idempotency key (tests/handlers.py)."""
    lines = (line for f in folder.iterdir() for line in f.read_text().splitlines())
    return Counter(line.split()[0] for line in lines if line.strip())


def lateness(runs: Iterable[Run]) -> dict[str, float]:
    """Start lateness (started_at - scheduled_at, both on the database clock) in seconds."""
    late = sorted((r.started_at - r.scheduled_at).total_seconds() for r in runs)
    if not late:
        return {"runs": 0}

    def pct(p: float) -> float:
        return late[min(len(late) - 1, int(p / 100 * len(late)))]

    return {
        "runs": len(late),
        "p50": pct(50),
        "p95": pct(95),
        "p99": pct(99),
        "max": late[-1],
        "min": late[0],
        "early": sum(1 for s in late if s < 0),
    }


def describe(stats: dict[str, float]) -> str:
    if not stats.get("runs"):
        return "no runs"
    ms = {k: round(v * 1000, 1) for k, v in stats.items() if k not in ("runs", "early")}
    return (
        f"{stats['runs']} runs, start lateness p50 {ms['p50']} ms, p95 {ms['p95']} ms, "
        f"p99 {ms['p99']} ms, max {ms['max']} ms, min {ms['min']} ms, early {stats['early']}"
    )
