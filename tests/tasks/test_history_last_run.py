"""A task's last run: last_run_failed (the console's last-run filter on "failed", which looks
only at tasks with a failed run) picks exactly the tasks last_run("status") says failed last."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tasks import history
from tasks.models import Task
from tests.factories import RunFactory, TaskFactory

pytestmark = pytest.mark.django_db


def run(task, status: str, hours: int, *, attempt: int = 1) -> None:
    """A run of `task` scheduled `hours` from now (negative: in the past)."""
    at = datetime.now(UTC) + timedelta(hours=hours)
    ended = status in ("succeeded", "failed", "cancelled", "skipped")
    RunFactory(
        task=task,
        status=status,
        attempt=attempt,
        scheduled_at=at,
        started_at=at if attempt else None,
        finished_at=at if ended else None,
        worker="w" if status == "running" else "",
        heartbeat_at=at if status == "running" else None,
    )


@pytest.fixture
def histories() -> set[str]:
    """Tasks with every kind of history; returns the names of those whose last run failed."""
    made = {name: TaskFactory(name=name) for name in NAMES}
    run(made["failed last"], "succeeded", -3)
    run(made["failed last"], "failed", -2)
    run(made["failed, then succeeded"], "failed", -3)
    run(made["failed, then succeeded"], "succeeded", -2)
    run(made["failed, then skipped"], "failed", -3)
    run(made["failed, then skipped"], "skipped", -2, attempt=0)  # happened: its time came
    run(made["failed, a skip ahead"], "failed", -3)
    run(made["failed, a skip ahead"], "skipped", 2, attempt=0)  # skip-next's: not yet
    run(made["failed, then retrying"], "failed", -3)
    run(made["failed, then retrying"], "scheduled", -1)  # attempt 1: a pending retry
    run(made["failed, then running"], "failed", -3)
    run(made["failed, then running"], "running", -1)
    run(made["failed, then planned"], "failed", -3)
    run(made["failed, then planned"], "scheduled", 1, attempt=0)  # not begun
    run(made["never failed"], "succeeded", -1)
    run(made["only planned"], "scheduled", 1, attempt=0)
    return {"failed last", "failed, a skip ahead", "failed, then planned"}


NAMES = [
    "failed last",
    "failed, then succeeded",
    "failed, then skipped",
    "failed, a skip ahead",
    "failed, then retrying",
    "failed, then running",
    "failed, then planned",
    "never failed",
    "only planned",
    "no runs",
]


def test_last_run_failed_picks_the_tasks_last_run_says_failed(histories) -> None:
    tasks = Task.objects.filter(name__in=NAMES)
    plain = tasks.alias(last=history.last_run("status")).filter(last="failed")
    narrowed = tasks.alias(last=history.last_run_failed()).filter(last="failed")

    assert set(plain.values_list("name", flat=True)) == histories
    assert set(narrowed.values_list("name", flat=True)) == histories
