"""A planning pass locks its tasks against other schedulers and changes of the task, not against
the foreign key checks of rows that name them."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction

from tasks import schedules
from tasks.db import db_now
from tasks.transitions import creation
from tasks.transitions.plan import plan_due_tasks
from tests.factories import RunFactory, UserFactory

pytestmark = pytest.mark.django_db(transaction=True)


def _in_another_transaction(work, *, lock_timeout: str = "2s") -> list[BaseException]:
    """`work()` in a transaction of its own connection (another thread), committed; what it
    raised, if anything. A lock wait longer than `lock_timeout` raises."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            with transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute("SELECT set_config('lock_timeout', %s, true)", [lock_timeout])
                work()
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    return errors


def test_a_run_naming_a_task_in_a_planning_pass_commits_without_waiting() -> None:
    now = db_now()
    schedule = schedules.normalize({"type": "interval", "every": 60}, now=now)
    data = {"kind": "handler", "payload": {"name": "noop", "args": {}}, "schedule": schedule}
    task, _ = creation.create_task(owner=UserFactory(), data=data, now=now)
    later = now + timedelta(minutes=5)

    with transaction.atomic():  # the pass's locks are held to this commit
        assert plan_due_tasks(now=later).planned >= 1
        # Its foreign key check (FOR KEY SHARE of the task) runs at the commit.
        errors = _in_another_transaction(
            lambda: RunFactory(task=task, scheduled_at=now + timedelta(days=1))
        )
        assert errors == []
        # Another scheduler's pass still skips the task, and a change of it still waits.
        passes: list[int] = []
        assert (
            _in_another_transaction(lambda: passes.append(plan_due_tasks(now=later).planned)) == []
        )
        assert passes == [0]
        waited = _in_another_transaction(
            lambda: list(type(task).objects.select_for_update().filter(pk=task.pk)),
            lock_timeout="200ms",
        )
        assert len(waited) == 1 and "lock timeout" in str(waited[0])
