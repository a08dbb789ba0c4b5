"""The misfire policy at claim time, for runs planned on time that no worker started.

The occurrences are planned as a scheduler would have planned them, on time; then no worker
claims them until long after their grace period, as after a worker outage.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.db import connection, transaction

from tasks import occurrences
from tasks.db import db_now
from tasks.models import Run, Task
from tasks.transitions import claim
from tasks.transitions.plan import plan_task
from tests.factories import UserFactory
from tests.tasks.recurring_support import iso, recurring_task

pytestmark = pytest.mark.django_db
GRACE = 5


def planned_on_time(policy: str, *, seconds: int = 30, **extra: object) -> Task:
    """A 1-s task whose occurrences of the last `seconds` were planned before they were due."""
    now = db_now().replace(microsecond=0)
    raw = {
        "type": "interval",
        "every": 1,
        "allow_every_second": True,
        "start_at": iso(now - timedelta(seconds=seconds)),
        "misfire": policy,
        "misfire_grace": GRACE,
        **extra,
    }
    task = recurring_task(UserFactory(), raw, now=now, payload={"name": "noop", "args": {}})
    began = now - timedelta(seconds=seconds + 1)
    plan_task(task, now=began, horizon=now)  # nothing was late when planned
    assert not Run.objects.filter(task=task).exclude(status="scheduled").exists()
    return task


def claim_all() -> list[claim.ClaimedRun]:
    """Claim as a worker does: a claim that only recorded missed runs returns nothing, and the
    worker claims again at once because a due run is still waiting."""
    claimed: list[claim.ClaimedRun] = []
    due = (claim.seconds_until_next_due() or 1.0) <= 0.5
    while due:
        claimed += claim.claim_runs(worker="w1", limit=4, prefetch_seconds=0.5, owner_cap=0)
        due = (claim.seconds_until_next_due() or 1.0) <= 0.5
    return claimed


def statuses(task: Task) -> list[str]:
    runs = Run.objects.filter(task=task).order_by("scheduled_at")
    return list(runs.values_list("status", flat=True))


def late_before(task: Task, when: object) -> int:
    return Run.objects.filter(task=task, missed_after__lt=when).count()


def test_run_once_runs_only_the_latest_missed_occurrence() -> None:
    task = planned_on_time("run_once")
    before = db_now()
    claim_all()
    after = db_now()

    history = statuses(task)
    assert len(history) == 31, "every occurrence keeps its record"
    ran = history.count("running")
    skipped = history.count("skipped")
    assert history == ["skipped"] * skipped + ["running"] * ran, history
    # Late ones (past their grace when claimed): the latest of them runs, the rest are skipped;
    # the ones within the grace period run.
    assert late_before(task, before) - 1 <= skipped <= late_before(task, after) - 1
    run = Run.objects.filter(task=task, status="skipped").first()
    assert "misfire" in run.error and run.finished_at is not None and run.attempt == 0


def test_skip_records_every_missed_occurrence_skipped() -> None:
    task = planned_on_time("skip")
    before = db_now()
    claim_all()
    after = db_now()

    history = statuses(task)
    skipped = history.count("skipped")
    assert history == ["skipped"] * skipped + ["running"] * (31 - skipped)
    assert late_before(task, before) <= skipped <= late_before(task, after)


def test_run_all_runs_every_missed_occurrence_up_to_the_cap() -> None:
    task = planned_on_time("run_all", seconds=occurrences.RUN_ALL_CAP + 20)
    claim_all()

    history = statuses(task)
    skipped = history.count("skipped")
    assert history == ["skipped"] * skipped + ["running"] * (len(history) - skipped)
    # Only the late ones beyond the latest RUN_ALL_CAP late ones are skipped.
    assert 1 <= skipped <= occurrences.RUN_ALL_CAP + 21 - occurrences.RUN_ALL_CAP - GRACE + 1
    assert history.count("running") >= occurrences.RUN_ALL_CAP


def test_retries_and_one_time_tasks_are_never_missed() -> None:
    task = planned_on_time("skip")
    retry = Run.objects.filter(task=task).order_by("scheduled_at").first()
    Run.objects.filter(pk=retry.pk).update(attempt=1)  # its first attempt failed long ago
    owner = UserFactory()
    old = db_now() - timedelta(minutes=10)
    once = recurring_task(owner, {"type": "once", "run_at": iso(old)}, now=old)
    plan_task(once, now=old, horizon=old)

    claimed = {run.id for run in claim_all()}

    assert retry.pk in claimed
    assert Run.objects.get(task=once).id in claimed


def test_a_task_whose_last_occurrence_is_missed_completes() -> None:
    task = planned_on_time("skip", max_runs=10)
    assert Task.objects.get(pk=task.pk).next_unplanned_at is None

    assert claim_all() == []

    assert statuses(task) == ["skipped"] * 10
    assert Task.objects.get(pk=task.pk).status == "completed"


def test_a_grace_of_its_own_is_validated_and_shown(api) -> None:
    created = api.post(
        "/api/v1/tasks",
        {
            "kind": "handler",
            "payload": {"name": "noop", "args": {}},
            "schedule": {"type": "interval", "every": 10, "misfire_grace": 7},
        },
        format="json",
    )
    default = api.post("/api/v1/schedules/preview", {"schedule": "* * * * *"}, format="json")

    assert created.status_code == 201 and created.json()["schedule"]["misfire_grace"] == 7
    assert default.json()["schedule"]["misfire_grace"] == 60  # TASKS_MISFIRE_GRACE_SECONDS
    run = Run.objects.filter(task_id=created.json()["id"]).first()
    assert run.missed_after - run.execute_at == timedelta(seconds=7)


def last_two_occurrences_one_running() -> tuple[Task, claim.Outcome]:
    """A task's last two occurrences: the first running under worker w1 (its finish to record),
    the second late past its grace (a claim skips it as missed)."""
    task = planned_on_time("skip", max_runs=2)
    first = Run.objects.filter(task=task).order_by("scheduled_at").first()
    started = db_now()
    Run.objects.filter(pk=first.pk).update(
        status="running", attempt=1, worker="w1", started_at=started, heartbeat_at=started
    )
    finish = claim.Outcome(
        run_id=first.pk,
        attempt=1,
        status="succeeded",
        attempt_outcome="succeeded",
        started_at=started,
    )
    return task, finish


def test_a_task_completes_when_its_last_occurrence_is_missed_as_another_run_finishes() -> None:
    # One cycle statement records the first run's finish and skips the second as missed: each
    # part of the statement sees the other's run unfinished, yet the task must complete.
    task, finish = last_two_occurrences_one_running()

    recorded, claimed = claim.record_and_claim(
        worker="w1", outcomes=[finish], limit=1, prefetch_seconds=0.5, owner_cap=0
    )

    assert [run_id for run_id, _, _ in recorded] == [finish.run_id] and list(claimed) == []
    assert statuses(task) == ["succeeded", "skipped"]
    assert Task.objects.get(pk=task.pk).status == "completed"


def _waits_for_a_lock(thread: threading.Thread) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0] > 0 or not thread.is_alive()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("first", ["finish", "miss"])
def test_a_task_completes_when_two_workers_end_its_last_runs_at_once(first: str) -> None:
    # Worker w1 records the first run's finish while worker w2's claim skips the second as
    # missed, in two transactions open at once: neither sees the other's run ended.
    task, finish = last_two_occurrences_one_running()
    steps = {
        "finish": lambda: claim.record_outcomes(worker="w1", outcomes=[finish]),
        "miss": lambda: claim.claim_runs(worker="w2", limit=1, prefetch_seconds=0.5, owner_cap=0),
    }
    done, commit, errors = threading.Event(), threading.Event(), []

    def open_transaction(step: Callable[[], object]) -> None:
        try:
            with transaction.atomic():
                step()
                done.set()
                assert commit.wait(30)
        except Exception as exc:  # reported by the test's thread
            errors.append(exc)
        finally:
            done.set()
            connection.close()

    def then(step: Callable[[], object]) -> None:
        try:
            step()
        except Exception as exc:
            errors.append(exc)
        finally:
            connection.close()

    held = threading.Thread(target=open_transaction, args=(steps[first],))
    held.start()
    assert done.wait(30)
    second = threading.Thread(target=then, args=(steps["miss" if first == "finish" else "finish"],))
    second.start()
    deadline = time.monotonic() + 30
    while not _waits_for_a_lock(second) and time.monotonic() < deadline:
        time.sleep(0.05)
    commit.set()
    held.join(30)
    second.join(30)

    assert errors == []
    assert statuses(task) == ["succeeded", "skipped"]
    assert Task.objects.get(pk=task.pk).status == "completed"
