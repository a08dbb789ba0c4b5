"""Applying a task set: two applies of one set serialise on its row, never interleave."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection, transaction

from tasks import schedules
from tasks.exceptions import Conflict
from tasks.models import Run, Task
from tasks.transitions import lifecycle, tasksets
from tasks.transitions.taskset_plan import Declared, plan
from tests.factories import UserFactory

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def declared(key: str, expression: str) -> Declared:
    entry = {"kind": "handler", "payload": {"name": "noop"}, "schedule": expression}
    data = {
        "name": key,
        "kind": "handler",
        "payload": {"name": "noop", "args": {}},
        "schedule": schedules.normalize(expression, now=T0),
    }
    return Declared(key, entry, data)


def live(owner) -> dict[str, str]:
    tasks = Task.objects.filter(owner=owner, taskset__name="s").exclude(status="cancelled")
    return {t.taskset_key or "": t.schedule["expression"] for t in tasks}


def lock_waiters() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0]


@pytest.mark.concurrency
@pytest.mark.django_db(transaction=True)
def test_a_second_apply_waits_and_plans_against_the_first() -> None:
    owner = UserFactory()
    # The set exists already: its first insert would serialise two applies by itself.
    tasksets.apply_taskset(
        owner=owner, name="s", declared=[declared("a", "0 0 * * *")], force=False, now=T0
    )
    first = [declared("a", "0 1 * * *"), declared("b", "0 2 * * *")]
    second = [declared("b", "0 3 * * *"), declared("c", "0 4 * * *")]
    holding = threading.Event()
    release = threading.Event()
    answers: dict[str, dict] = {}

    def apply_first() -> None:
        try:
            with transaction.atomic():  # holds the set's row lock until `release`
                answers["first"] = tasksets.apply_taskset(
                    owner=owner, name="s", declared=first, force=False, now=T0
                )[1]
                holding.set()
                assert release.wait(timeout=30)
        finally:
            holding.set()
            connection.close()

    def apply_second() -> None:
        try:
            answers["second"] = tasksets.apply_taskset(
                owner=owner, name="s", declared=second, force=False, now=T0
            )[1]
        finally:
            connection.close()

    one = threading.Thread(target=apply_first)
    one.start()
    assert holding.wait(timeout=30)
    two = threading.Thread(target=apply_second)
    two.start()
    while lock_waiters() == 0 and two.is_alive():  # the second apply blocks on the set's row
        two.join(timeout=0.05)
    assert two.is_alive(), answers
    assert "second" not in answers
    release.set()
    one.join(timeout=30)
    two.join(timeout=30)

    assert [c["key"] for c in answers["first"]["create"]] == ["b"]
    # Planned after the first committed: b is an update, a a delete; not three creates.
    assert [c["key"] for c in answers["second"]["create"]] == ["c"]
    assert [u["key"] for u in answers["second"]["update"]] == ["b"]
    assert [d["key"] for d in answers["second"]["delete"]] == ["a"]
    assert answers["second"]["version"] == 3
    assert live(owner) == {"b": "0 3 * * *", "c": "0 4 * * *"}


@pytest.mark.django_db
def test_a_failing_removal_rolls_the_whole_apply_back() -> None:
    owner = UserFactory()
    tasksets.apply_taskset(
        owner=owner, name="s", declared=[declared("a", "0 1 * * *")], force=False, now=T0
    )
    task = Task.objects.get(taskset_key="a")
    run = lifecycle.run_now(task=task, now=T0)
    type(run).objects.filter(pk=run.pk).update(
        status="running", worker="w", started_at=T0, heartbeat_at=T0
    )
    with pytest.raises(Conflict):
        tasksets.apply_taskset(
            owner=owner, name="s", declared=[declared("z", "0 5 * * *")], force=False, now=T0
        )
    assert live(owner) == {"a": "0 1 * * *"}
    assert not Task.objects.filter(taskset_key="z").exists()
    tasksets.apply_taskset(
        owner=owner, name="s", declared=[declared("z", "0 5 * * *")], force=True, now=T0
    )
    assert live(owner) == {"z": "0 5 * * *"}


@pytest.mark.django_db
def test_a_pause_outside_the_set_is_resumed_unless_ignored() -> None:
    owner = UserFactory()
    entry = declared("a", "0 1 * * *")
    tasksets.apply_taskset(owner=owner, name="s", declared=[entry], force=False, now=T0)
    task = lifecycle.pause_task(task=Task.objects.get(taskset_key="a"), now=T0)
    kept = Declared("a", entry.entry, entry.data, ["status"])
    plan = tasksets.dry_run_taskset(owner=owner, name="s", declared=[kept])
    assert (plan["update"], plan["unchanged"]) == ([], 1)
    plan = tasksets.apply_taskset(owner=owner, name="s", declared=[entry], force=False, now=T0)[1]
    assert plan["update"][0]["changes"] == {"status": {"from": "paused", "to": "active"}}
    task.refresh_from_db()
    assert task.status == "active"


def _entry(key: str, expression: str, priority: int) -> Declared:
    item = declared(key, expression)
    item.entry["priority"] = item.data["priority"] = priority
    return item


def _state(owner) -> dict[str, tuple]:
    """Each task of the owner by key: its row (ids aside) and its runs, ordered."""
    columns = ("status", "schedule", "priority", "max_attempts", "next_unplanned_at")
    found: dict[str, tuple] = {}
    for task in Task.objects.filter(owner=owner).order_by("taskset_key", "id"):
        runs = (
            Run.objects.filter(task=task)
            .order_by("scheduled_at", "attempt", "status")
            .values_list(
                "scheduled_at",
                "execute_at",
                "status",
                "attempt",
                "priority",
                "max_attempts",
                "error",
            )
        )
        row = tuple(getattr(task, name) for name in columns)
        extra = (task.runs_planned, task.taskset_id is not None, task.taskset_entry)
        found[task.taskset_key or ""] = (row, extra, list(runs))
    return found


@pytest.mark.django_db
def test_a_batch_apply_leaves_what_the_single_task_transitions_leave() -> None:
    """200 changed entries (schedules, priorities, a paused task resumed, a task with a run in
    flight) and 20 removed, applied at once, end exactly as the same changes made one task at
    a time through update_task, resume_task and cancel_task."""
    began, later = T0 + timedelta(seconds=45), T0 + timedelta(seconds=50)
    first = [_entry(f"k{i:03}", "* * * * *", 5) for i in range(220)]
    changed = [
        _entry(f"k{i:03}", "*/2 * * * *" if i % 2 else "* * * * *", 6 if i % 3 else 7)
        for i in range(200)
    ]
    batched, single = UserFactory(), UserFactory()
    for owner in (batched, single):
        tasksets.apply_taskset(owner=owner, name="s", declared=first, force=True, now=began)
        for task in Task.objects.filter(owner=owner, taskset_key__endswith="5"):
            lifecycle.pause_task(task=task, now=began)
        for task in Task.objects.filter(owner=owner, taskset_key__endswith="0"):
            run = lifecycle.run_now(task=task, now=began)
            type(run).objects.filter(pk=run.pk).update(
                status="running", attempt=1, worker="w", started_at=began, heartbeat_at=began
            )
    # The next minute's occurrence is planned (the look-ahead): the changes have runs to move.
    assert Run.objects.filter(task__owner=batched, status="scheduled").count() == 198

    carried = tasksets.apply_taskset(
        owner=batched, name="s", declared=changed, force=True, now=later
    )[1]
    assert (len(carried["update"]), len(carried["delete"])) == (200, 20)

    taskset = tasksets.find_taskset(owner=single, name="s")
    planned = plan(taskset, changed)
    for item, task, changes in planned.update:
        data = tasksets._update_data(changes, item)
        if data:
            lifecycle.update_task(task=task, data=data, now=later)
        if "status" in changes:
            lifecycle.resume_task(task=task, now=later)
        tasksets._remember([(task, item)])
    for task in planned.delete:
        lifecycle.cancel_task(task=task, force=True, now=later)
        Task.objects.filter(pk=task.pk).update(taskset=None)

    assert _state(batched) == _state(single)
    assert Task.objects.filter(owner=batched, status="paused").count() == 0
    resumed = Task.objects.get(owner=batched, taskset_key="k015")
    assert resumed.status == "active" and resumed.priority == 7
