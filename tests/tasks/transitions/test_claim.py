"""The claim's answer is read by column name: its columns and ClaimedRun's fields are one list."""

from __future__ import annotations

import pytest
from django.db import connection
from django.utils import timezone

from tasks import outbox, schedules
from tasks.db import prepared_cursor
from tasks.transitions import claim
from tasks.transitions.creation import create_tasks
from tests.factories import RunFactory, UserFactory
from tests.generic_plans import generic_plan, nodes

PARAMS = {
    "worker": "columns-test",
    "limit": 4,
    "prefetch": 0.5,
    "owner_cap": 0,
    **claim.NO_FLOOR.params(),
    "window": 60,
    "channel": outbox.NOTIFICATION_CHANNEL,
    **claim.NO_LIMIT.params(),
}
RECORDED = ["recorded_id", "recorded_task_id", "recorded_status", "woke", "notified"]


def columns(sql: str, params: dict) -> list[str]:
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)
        return [column.name for column in cursor.cursor.description]


@pytest.mark.django_db(transaction=True)
def test_the_claims_columns_are_the_claimed_runs_fields() -> None:
    run = RunFactory()
    fields = list(claim.CLAIMED_FIELDS)

    assert columns(claim.claim_sql(4), PARAMS) == ["row", *fields, "rate_wait"]
    outcome = claim.Outcome(
        run_id=run.id, attempt=0, status="succeeded", attempt_outcome="succeeded", started_at=None
    )
    finish = claim._finish_params("columns-test", [outcome])
    assert columns(claim.cycle_sql(4), {**PARAMS, **finish}) == [
        "row",
        *RECORDED,
        *fields,
        "rate_wait",
    ]
    assert columns(claim.SQL["record"], finish) == RECORDED


@pytest.mark.django_db(transaction=True)
def test_a_claimed_run_is_read_by_name() -> None:
    run = RunFactory(priority=7)

    [claimed] = claim.claim_runs(worker="columns-test", limit=4, prefetch_seconds=0.5, owner_cap=0)

    assert (claimed.id, claimed.task_id, claimed.attempt, claimed.priority) == (
        run.id,
        run.task_id,
        1,
        7,
    )
    assert claimed.backoff_base == run.task.retry_backoff_base
    assert claimed.overlap == "allow" and claimed.kind == run.task.kind


@pytest.mark.django_db(transaction=True)
def test_the_workers_cycle_is_planned_once_per_connection() -> None:
    # PostgreSQL re-plans a prepared statement on every execution when its generic plan looks
    # dearer than the plans for the actual values: a parameter that only a custom plan can fold
    # away (the sandbox predicate was one) costs the worker a planning per cycle. (A worker
    # without a sandbox looks up each candidate's task, and is planned per cycle: claim.sql.)
    executables = True
    # A queue of the size where it showed: a few thousand due runs, with statistics.
    now = timezone.now()
    item = {
        "kind": "handler",
        "payload": {"name": "noop", "args": {}},
        "schedule": schedules.normalize({"type": "once", "run_at": now.isoformat()}, now=now),
    }
    create_tasks(owner=UserFactory(), items=[dict(item) for _ in range(3000)], now=now)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE tasks_run")
        cursor.execute("ANALYZE tasks_task")
    capacity = claim.Capacity(executables=executables)
    claimed = claim.claim_runs(
        worker="plan-test", limit=4, prefetch_seconds=0.5, owner_cap=0, capacity=capacity
    )
    for _ in range(8):  # plan_cache_mode=auto weighs the generic plan after five custom ones
        outcomes = [
            claim.Outcome(
                run_id=run.id,
                attempt=run.attempt,
                status="succeeded",
                attempt_outcome="succeeded",
                started_at=None,
            )
            for run in claimed
        ]
        _, claimed = claim.record_and_claim(
            worker="plan-test",
            outcomes=outcomes,
            limit=4,
            prefetch_seconds=0.5,
            owner_cap=0,
            capacity=capacity,
        )
    assert claimed

    with prepared_cursor() as cursor:
        cursor.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
            " WHERE statement LIKE %s AND statement LIKE %s",
            ["WITH done AS%", "%SELECT 'recorded', %"],
        )
        [(generic, custom)] = cursor.fetchall()
    assert generic >= 3, (generic, custom)


@pytest.mark.django_db(transaction=True)
def test_an_idle_workers_reads_are_planned_once_per_connection() -> None:
    # An idle worker asks when the next run is due after every claim, and finds its claim floor
    # every second: prepared on the connection, each keeps its generic plan, where a statement
    # bound on the client was planned on every call.
    RunFactory(priority=3)
    for i in range(8):
        claim.seconds_until_next_due(later_than=float(i))
        claim.claim_floor(margin_seconds=10.0 + i)

    for fragment in ("min(first.execute_at) - clock_timestamp()", "least(min(first.execute_at)"):
        with prepared_cursor() as cursor:
            cursor.execute(
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
                " WHERE strpos(statement, %(fragment)s) > 0",
                {"fragment": fragment},
            )
            [(generic, custom)] = cursor.fetchall()
        assert generic >= 3 and custom <= 5, (fragment, generic, custom)


@pytest.mark.django_db(transaction=True)
def test_the_outcome_write_reads_the_outcomes_once() -> None:
    """The outcome write's generic plan (the worker's: force_generic_plan) is driven by the
    outcomes, not by the worker's running runs: its arrays are unnested once, not again for each
    running run (n x n rows a cycle when the running runs drove it)."""
    now = timezone.now()
    runs = [RunFactory(scheduled_at=now) for _ in range(4)]
    outcomes = [claim.Outcome(run.pk, 1, "succeeded", "succeeded", started_at=now) for run in runs]
    # A history, planned on while no run runs (as a worker started on a queue plans): the runs
    # are read by index, not whole, and the statistics count no running run.
    with connection.cursor() as cursor:
        cursor.execute(
            """INSERT INTO tasks_run
               SELECT (jsonb_populate_record(NULL::tasks_run, to_jsonb(r) || jsonb_build_object(
                   'id', gen_random_uuid(), 'scheduled_at', r.scheduled_at - g * interval '1 s',
                   'status', 'succeeded', 'finished_at', r.scheduled_at))).*
                 FROM tasks_run r CROSS JOIN generate_series(1, 5000) AS g WHERE r.id = %s""",
            [runs[0].pk],
        )
        cursor.execute("ANALYZE tasks_run")
        cursor.execute(
            """UPDATE tasks_run SET status = 'running', worker = 'w', attempt = 1,
                      started_at = now(), heartbeat_at = now() WHERE id = ANY(%s)""",
            [[run.pk for run in runs]],
        )
    params = claim._finish_params("w", outcomes)
    plan = generic_plan(claim.SQL["record"], params, options="ANALYZE, FORMAT JSON")["Plan"]
    [outcomes_read] = [node for node in nodes(plan) if node.get("Alias") == "v"]
    assert outcomes_read["Node Type"] == "Function Scan"
    assert (outcomes_read["Actual Loops"], outcomes_read["Actual Rows"]) == (1, 4)


@pytest.mark.django_db(transaction=True)
def test_a_cycle_ends_each_one_time_task_as_its_run_ended() -> None:
    # `completed` reads the batch's outcomes from `done`: a task whose last run failed is failed,
    # one whose run succeeded is completed, in the statement that records them.
    from tasks.models import Task

    now = timezone.now()
    item = {
        "kind": "handler",
        "payload": {"name": "noop", "args": {}},
        "schedule": schedules.normalize({"type": "once", "run_at": now.isoformat()}, now=now),
    }
    create_tasks(owner=UserFactory(), items=[dict(item) for _ in range(4)], now=now)
    runs = claim.claim_runs(worker="end-test", limit=4, prefetch_seconds=0.5, owner_cap=0)
    assert len(runs) == 4
    ends = ["failed", "succeeded", "failed", "succeeded"]
    outcomes = [
        claim.Outcome(
            run_id=run.id,
            attempt=run.attempt,
            status=status,
            attempt_outcome=status,
            started_at=now,
        )
        for run, status in zip(runs, ends, strict=True)
    ]

    recorded, _ = claim.record_and_claim(
        worker="end-test", outcomes=outcomes, limit=4, prefetch_seconds=0.5, owner_cap=0
    )

    assert len(recorded) == 4
    tasks = {run.task_id: status for run, status in zip(runs, ends, strict=True)}
    expected = {"failed": "failed", "succeeded": "completed"}
    assert {task.id: task.status for task in Task.objects.filter(id__in=tasks)} == {
        task_id: expected[status] for task_id, status in tasks.items()
    }
