"""Worker capacity, in process: the claim against a worker's capacity (tasks/sql/claim.sql), the
reviewer's "no live worker offers" marking (tasks/sql/rescue.sql) and requests on runs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from tasks.models import Process, Run, Task
from tasks.resources import cpu_millis, memory_bytes
from tasks.transitions import claim
from tasks.transitions.claim import Capacity, ClaimedRuns
from tasks.transitions.lifecycle import update_task
from tasks.transitions.rescue import mark_unplaceable_runs
from tests.factories import RunFactory, TaskFactory

pytestmark = pytest.mark.django_db

CPU2 = {"cpu": "2"}


def due(priority: int, resources: dict | None = None, *, ago: float = 1.0, **fields) -> Run:
    """A due run of a new task at `priority` requesting `resources`."""
    task = TaskFactory(priority=priority, resources=resources or {})
    task.set_requests()
    task.save()
    at = datetime.now(UTC) - timedelta(seconds=ago)
    return RunFactory(task=task, scheduled_at=at, **task.requests, **fields)


def offering(cpu: str | None = None, memory: str | None = None, *, used: int = 0) -> Capacity:
    """A worker offering `cpu`/`memory` with `used` millicores held by its runs in flight."""
    cpu_total = cpu_millis(cpu) if cpu else claim.UNLIMITED
    memory_total = memory_bytes(memory) if memory else claim.UNLIMITED
    return Capacity(cpu_total, memory_total, cpu_total - used, memory_total)


def take(capacity: Capacity, limit: int = 4) -> ClaimedRuns:
    return claim.claim_runs(
        worker="w", limit=limit, prefetch_seconds=0, owner_cap=0, capacity=capacity
    )


def state(run: Run) -> tuple[str, str]:
    run.refresh_from_db()
    return run.status, run.wait_reason


def test_runs_that_fit_together_are_claimed_together() -> None:
    high, low = due(9, CPU2), due(1, CPU2)
    claimed = take(offering("4"))
    assert [r.id for r in claimed] == [high.pk, low.pk]
    assert [(r.cpu_millis, r.memory_bytes) for r in claimed] == [(2000, 0), (2000, 0)]
    assert not claimed.held_back


def test_the_run_that_does_not_fit_waits_with_its_reason() -> None:
    high, low = due(9, CPU2), due(5, {"cpu": "2", "memory": "1Gi"})
    claimed = take(offering("3"))
    assert [r.id for r in claimed] == [high.pk]
    assert claimed.held_back
    assert state(low) == (
        "waiting_for_resource",
        "waiting for free capacity (cpu=2, memory=1Gi) on a worker",
    )


def test_no_backfill_a_smaller_lower_priority_run_waits_behind() -> None:
    # 1 CPU free: the 2-CPU run at priority 9 does not fit; nothing lower starts before it,
    # neither a 1-CPU run that would fit nor a run with no requests at all.
    blocked, smaller, plain = due(9, CPU2), due(5, {"cpu": "1"}), due(1)
    claimed = take(offering("2", used=1000))
    assert claimed == [] and claimed.held_back
    assert state(blocked) == (
        "waiting_for_resource",
        "waiting for free capacity (cpu=2) on a worker",
    )
    assert state(smaller)[0] == "waiting_for_resource"
    assert state(plain) == (
        "waiting_for_resource",
        "waiting behind a higher-priority run that needs free capacity",
    )


def test_a_run_over_the_workers_total_is_skipped_and_blocks_nothing() -> None:
    huge, small = due(9, {"cpu": "64"}), due(1, {"cpu": "1"})
    claimed = take(offering("2"))
    assert [r.id for r in claimed] == [small.pk]
    assert not claimed.held_back
    assert state(huge) == ("scheduled", ""), "left for a bigger worker and the reviewer"
    # And how long the worker sleeps does not count it either: it would spin on it.
    assert claim.seconds_until_next_due(offering("2")) is None
    assert claim.seconds_until_next_due(offering("64")) < 0


def test_memory_counts_like_cpu() -> None:
    first, second = due(9, {"memory": "3Gi"}), due(8, {"memory": "2Gi"})
    claimed = take(offering(memory="4Gi"))
    assert [r.id for r in claimed] == [first.pk]
    assert state(second)[0] == "waiting_for_resource"


def test_a_held_run_is_claimed_when_capacity_frees_and_its_reason_cleared() -> None:
    high, low = due(9, CPU2), due(5, CPU2)
    assert [r.id for r in take(offering("2"))] == [high.pk]
    assert state(low)[0] == "waiting_for_resource"
    [claimed] = take(offering("2"))  # the priority 9 run finished: its 2 CPUs are free again
    assert claimed.id == low.pk
    assert state(low) == ("running", "")


def test_held_back_runs_are_rewritten_only_when_their_state_changes() -> None:
    due(9, CPU2)
    low = due(5, CPU2)
    take(offering("2"))
    with connection.cursor() as cursor:
        cursor.execute("SELECT xmin::text FROM tasks_run WHERE id = %s", [low.pk])
        before = cursor.fetchone()[0]
        claimed = take(offering("2", used=2000))
        cursor.execute("SELECT xmin::text FROM tasks_run WHERE id = %s", [low.pk])
        assert cursor.fetchone()[0] == before, "no new row version for an unchanged wait"
    assert claimed == [] and claimed.held_back


def test_runs_not_due_yet_are_not_marked() -> None:
    due(9, CPU2)
    later = due(5, CPU2, ago=-0.3)  # within the prefetch window, not due yet
    claimed = claim.claim_runs(
        worker="w", limit=4, prefetch_seconds=0.5, owner_cap=0, capacity=offering("2")
    )
    assert len(claimed) == 1 and claimed.held_back is False
    assert state(later) == ("scheduled", "")


def test_a_worker_that_declares_nothing_claims_as_before() -> None:
    runs = [due(p, {"cpu": "64", "memory": "100Gi"}) for p in (9, 5, 1)]
    claimed = take(claim.NO_LIMIT)
    assert [r.id for r in claimed] == [r.pk for r in runs]


def test_the_cycle_statement_records_and_holds_back_in_one_round_trip() -> None:
    first, second = due(9, CPU2), due(5, CPU2)
    [held] = take(offering("2"))
    done = claim.Outcome(
        run_id=held.id,
        attempt=held.attempt,
        status="succeeded",
        attempt_outcome="succeeded",
        started_at=held.claimed_at,
    )
    due(7, CPU2)  # claimed next; the priority 5 run is still held back
    recorded, claimed = claim.record_and_claim(
        worker="w",
        outcomes=[done],
        limit=4,
        prefetch_seconds=0,
        owner_cap=0,
        capacity=offering("2"),
    )
    assert [r[0] for r in recorded] == [first.pk]
    assert len(claimed) == 1 and claimed[0].priority == 7 and claimed.held_back
    assert state(second)[0] == "waiting_for_resource"


# --- the reviewer: runs no live worker can hold -------------------------------------------


def worker_row(name: str, *, cpu: str | None, memory: str | None = None, **fields) -> Process:
    now = datetime.now(UTC)
    values = {
        "role": "worker",
        "host": "h",
        "pid": 1,
        "started_at": now,
        "last_seen_at": now,
        "cpu_millis": cpu_millis(cpu) if cpu else None,
        "memory_bytes": memory_bytes(memory) if memory else None,
    }
    return Process.objects.create(name=name, **(values | fields))


def review() -> list[tuple]:
    return mark_unplaceable_runs(dead_after_seconds=15)


def test_a_run_no_live_worker_offers_enough_for_waits_with_a_reason() -> None:
    worker_row("w-small", cpu="2", memory="4Gi")
    huge = due(5, {"cpu": "64"})
    both = due(5, {"cpu": "64", "memory": "1Ti"})
    fits = due(5, {"cpu": "2", "memory": "4Gi"})
    changed = dict(review())
    assert state(huge) == ("waiting_for_resource", "no live worker offers cpu=64")
    assert state(both) == ("waiting_for_resource", "no live worker offers cpu=64, memory=1Ti")
    assert state(fits) == ("scheduled", "")
    assert set(changed) == {huge.pk, both.pk}
    assert review() == [], "written once, not on every pass"


def test_dead_and_stopped_workers_offer_nothing() -> None:
    long_ago = datetime.now(UTC) - timedelta(minutes=5)
    worker_row("w-dead", cpu="64", last_seen_at=long_ago)
    worker_row("w-stopped", cpu="64", stopped_at=datetime.now(UTC))
    worker_row("w-small", cpu="2")
    worker_row("scheduler", cpu=None, role="scheduler")
    huge = due(5, {"cpu": "64"})
    review()
    assert state(huge) == ("waiting_for_resource", "no live worker offers cpu=64")


def test_requests_that_fit_no_worker_together_name_both() -> None:
    worker_row("w-cpu", cpu="64", memory="1Gi")
    worker_row("w-mem", cpu="1", memory="64Gi")
    run = due(5, {"cpu": "8", "memory": "8Gi"})
    review()
    assert state(run) == ("waiting_for_resource", "no live worker offers cpu=8 with memory=8Gi")


def test_when_a_big_enough_worker_comes_the_run_is_scheduled_again() -> None:
    worker_row("w-small", cpu="2")
    huge = due(5, {"cpu": "64"})
    review()
    assert state(huge)[0] == "waiting_for_resource"
    worker_row("w-unlimited", cpu=None)  # declares nothing: no limit
    assert review() == [(huge.pk, "")]
    assert state(huge) == ("scheduled", "")


def test_runs_without_requests_or_not_due_are_left_alone() -> None:
    worker_row("w-small", cpu="2")
    plain = due(5)
    later = due(5, {"cpu": "64"}, ago=-60)
    assert review() == []
    assert state(plain) == ("scheduled", "") and state(later) == ("scheduled", "")


# --- requests follow the task's resources --------------------------------------------------


def test_changing_a_tasks_resources_changes_its_claimable_runs() -> None:
    run = due(5, {"cpu": "64"})
    Run.objects.filter(pk=run.pk).update(
        status="waiting_for_resource",
        wait_kind="resources",
        wait_reason="no live worker offers cpu=64",
    )
    task = Task.objects.get(pk=run.task_id)
    update_task(
        task=task, data={"resources": {"cpu": "500m", "memory": "1Gi"}}, now=datetime.now(UTC)
    )
    task.refresh_from_db()
    run.refresh_from_db()
    assert (task.cpu_millis, task.memory_bytes) == (500, 2**30)
    assert (run.cpu_millis, run.memory_bytes) == (500, 2**30)
    assert (run.status, run.wait_reason) == ("scheduled", "")


def test_tasks_created_through_the_api_plan_runs_with_their_requests(api) -> None:
    body = {
        "kind": "handler",
        "payload": {"name": "noop"},
        "resources": {"cpu": "1.5"},
        "schedule": {"type": "once"},
    }
    created = api.post("/api/v1/tasks", body, format="json")
    assert created.status_code == 201, created.content
    run = Run.objects.get(task_id=created.json()["id"])
    assert (run.cpu_millis, run.memory_bytes) == (1500, 0)
    shown = api.get(f"/api/v1/runs/{run.pk}").json()
    assert shown["wait_reason"] == ""


@pytest.mark.parametrize("flag", ["--cpu", "--memory"])
def test_runworker_refuses_a_malformed_quantity(flag: str) -> None:
    with pytest.raises(CommandError, match=f"{flag} '2 cores'"):
        call_command("runworker", flag, "2 cores", "--once")


def test_the_api_shows_only_the_reason_of_a_current_wait(api, user) -> None:
    waiting = due(
        5, {"cpu": "64"}, status="waiting_for_resource", wait_kind="resources", wait_reason="why"
    )
    gone = due(
        5, {"cpu": "64"}, status="cancelled", wait_reason="why", finished_at=datetime.now(UTC)
    )
    # The user's runs of the user's tasks (a run's owner is its task's).
    Run.objects.filter(pk__in=[waiting.pk, gone.pk]).update(owner=user)
    Task.objects.filter(pk__in=[waiting.task_id, gone.task_id]).update(owner=user)
    assert api.get(f"/api/v1/runs/{waiting.pk}").json()["wait_reason"] == "why"
    assert api.get(f"/api/v1/runs/{gone.pk}").json()["wait_reason"] == ""
