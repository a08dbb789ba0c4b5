"""The lean claim (tasks/sql/claim.sql, `lean_claim_ctes`): without the key and rate fragments,
it never starts a keyed or rate-keyed run, nor one ranked after one it saw; it says so, and the
full claim then goes on from there."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from psycopg.rows import dict_row

from tasks import outbox
from tasks.db import prepared_cursor
from tasks.models import ConcurrencyKey, RateKey, Run, Task
from tasks.transitions import claim
from tests.factories import RunFactory, TaskFactory, UserFactory

pytestmark = pytest.mark.django_db


def task(
    priority: int,
    *,
    key: ConcurrencyKey | None = None,
    rate: RateKey | None = None,
    resources: dict | None = None,
) -> Task:
    made = TaskFactory(priority=priority, owner=UserFactory(), resources=resources or {})
    made.concurrency_key, made.rate_key = key, rate
    made.set_requests()
    made.save()
    return made


def due(of: Task, *, ago: float) -> Run:
    at = datetime.now(UTC) - timedelta(seconds=ago)
    return RunFactory(task=of, scheduled_at=at, **of.requests)


def lean_claim(limit: int = 8, capacity: claim.Capacity = claim.NO_LIMIT) -> list[dict]:
    """The lean claim statement's answer rows, as the worker's connection runs it."""
    params = {
        "worker": "lean",
        "limit": limit,
        "prefetch": 0,
        "owner_cap": 0,
        "window": 60,
        "channel": outbox.NOTIFICATION_CHANNEL,
        **claim.NO_FLOOR.params(),
        **capacity.params(),
    }
    with prepared_cursor(row_factory=dict_row) as cursor:
        cursor.execute(claim.claim_sql(limit, lean=True), params)
        return cursor.fetchall()


def untouched(*runs: Run) -> bool:
    fresh = Run.objects.filter(pk__in=[r.pk for r in runs])
    return all(
        (r.status, r.attempt, r.wait_kind, r.worker) == ("scheduled", 0, "", "") for r in fresh
    )


@pytest.mark.parametrize("kind", ["concurrency", "rate"])
def test_the_lean_claim_stops_at_the_first_keyed_candidate_and_says_so(kind: str) -> None:
    owner = UserFactory()
    key = ConcurrencyKey.objects.create(owner=owner, name="db", max_running=10)
    rate = RateKey.objects.create(owner=owner, name="crm", rate_limit=10, per_seconds=60)
    keyed = task(5, key=key) if kind == "concurrency" else task(5, rate=rate)
    first = due(task(9), ago=1)  # ranked before the keyed run: claimed
    tied = due(task(5), ago=30)  # same priority, due earlier: claimed
    stop = due(keyed, ago=20)
    after = [due(task(5), ago=10), due(task(1), ago=60)]  # ranked after it: left alone

    rows = lean_claim()

    assert {r["id"] for r in rows if r["row"] == "claimed"} == {first.pk, tied.pk}
    assert [r["row"] for r in rows if r["row"] != "claimed"] == ["keyed"]
    assert untouched(stop, *after)
    key.refresh_from_db()
    rate.refresh_from_db()
    assert (key.admitted, rate.starts) == (0, [])


def test_a_keyed_run_first_in_claim_order_stops_the_lean_claim_before_any_run() -> None:
    key = ConcurrencyKey.objects.create(owner=UserFactory(), name="db", max_running=1)
    running = due(task(9, key=key), ago=5)
    [taken] = claim.claim_runs(worker="x", limit=1, prefetch_seconds=0, owner_cap=0)
    assert taken.id == running.pk
    # Its key is full: the full claim's scan skips this run, the lean one stops at it.
    stop = due(task(9, key=key), ago=2)
    later = due(task(3), ago=100)

    rows = lean_claim()

    assert [r["row"] for r in rows] == ["keyed"]
    assert untouched(stop, later)


def test_a_full_rate_keys_due_run_stops_the_lean_claim_and_the_full_one_says_when() -> None:
    key = RateKey.objects.create(owner=UserFactory(), name="crm", rate_limit=1, per_seconds=60)
    limited = task(9, rate=key)
    first = due(limited, ago=5)
    [taken] = claim.claim_runs(worker="x", limit=1, prefetch_seconds=0, owner_cap=0)
    assert taken.id == first.pk
    # The key is full: the full claim's scan skips its runs, the lean one stops at them.
    held = due(limited, ago=2)
    later = due(task(3), ago=8)

    assert [r["row"] for r in lean_claim()] == ["keyed"]
    assert untouched(held, later)

    claimed = claim.claim_runs(worker="w", limit=8, prefetch_seconds=0, owner_cap=0, lean=True)
    assert claimed.keyed and [r.id for r in claimed] == [later.pk]
    assert claimed.rate_wait is not None and 50 < claimed.rate_wait <= 60


def test_without_keyed_candidates_the_lean_claim_claims_and_holds_as_the_full_one() -> None:
    small = due(task(9), ago=3)
    held = due(task(5, resources={"cpu": "2"}), ago=2)
    behind = due(task(1), ago=1)
    capacity = claim.Capacity(cpu_total=4000, cpu_free=1000)

    rows = lean_claim(capacity=capacity)

    assert [r["id"] for r in rows if r["row"] == "claimed"] == [small.pk]
    assert [r["row"] for r in rows if r["row"] != "claimed"] == ["held"]
    waiting = Run.objects.get(pk=held.pk)
    assert (waiting.status, waiting.wait_kind) == ("waiting_for_resource", "capacity")
    assert waiting.wait_reason == "waiting for free capacity (cpu=2) on a worker"
    behind.refresh_from_db()
    assert (behind.status, behind.wait_kind) == ("waiting_for_resource", "capacity")
    assert behind.wait_reason == "waiting behind a higher-priority run that needs free capacity"


def test_a_lean_claim_that_stopped_is_followed_by_the_full_claim_in_order() -> None:
    key = ConcurrencyKey.objects.create(owner=UserFactory(), name="db", max_running=10)
    first = due(task(9), ago=1)
    keyed = due(task(5, key=key), ago=5)
    after = due(task(1), ago=9)

    claimed = claim.claim_runs(worker="w", limit=8, prefetch_seconds=0, owner_cap=0, lean=True)

    assert claimed.keyed
    assert [r.id for r in claimed] == [first.pk, keyed.pk, after.pk]
    key.refresh_from_db()
    assert key.admitted == 1


def test_the_lean_cycle_records_the_batch_and_the_full_claim_fills_the_slots_left() -> None:
    key = ConcurrencyKey.objects.create(owner=UserFactory(), name="db", max_running=10)
    finished = due(task(5), ago=50)
    [mine] = claim.claim_runs(worker="w", limit=1, prefetch_seconds=0, owner_cap=0, lean=True)
    assert mine.id == finished.pk
    first = due(task(9), ago=1)
    keyed = due(task(5, key=key), ago=5)
    after = due(task(1), ago=9)
    outcome = claim.Outcome(
        run_id=mine.id,
        attempt=mine.attempt,
        status="succeeded",
        attempt_outcome="succeeded",
        started_at=mine.claimed_at,
    )

    recorded, claimed = claim.record_and_claim(
        worker="w", outcomes=[outcome], limit=2, prefetch_seconds=0, owner_cap=0, lean=True
    )

    assert [r[0] for r in recorded] == [mine.id]
    assert claimed.keyed and [r.id for r in claimed] == [first.pk, keyed.pk]
    assert untouched(after)


def test_the_lean_claims_scan_is_the_full_claims_scan_of_the_claimable_index() -> None:
    of = task(5)
    hour_ago = datetime.now(UTC) - timedelta(hours=1)
    Run.objects.bulk_create(
        RunFactory.build(task=of, scheduled_at=hour_ago + timedelta(seconds=i), priority=i % 10)
        for i in range(2000)
    )
    params = {
        "worker": "w",
        "limit": 4,
        "prefetch": 0,
        "owner_cap": 0,
        "window": 60,
        "channel": outbox.NOTIFICATION_CHANNEL,
        **claim.NO_FLOOR.params(),
        **claim.NO_LIMIT.params(),
    }
    scans = {}
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE tasks_run")
        for lean, cte in ((False, "CTE candidates"), (True, "CTE seen")):
            cursor.execute("EXPLAIN (FORMAT JSON) " + claim.claim_sql(4, lean=lean), params)
            [[explained]] = cursor.fetchall()
            if isinstance(explained, str):
                explained = json.loads(explained)
            [scan] = [n for n in _nodes(explained[0]["Plan"]) if n.get("Subplan Name") == cte]
            scans[lean] = [
                (n["Node Type"], n.get("Index Name"), n.get("Index Cond"))
                for n in _nodes(scan)
                if n.get("Relation Name") == "tasks_run"
            ]
    assert scans[True] == scans[False]
    assert [node[:2] for node in scans[True]] == [("Index Scan", "run_claimable_idx")]


def _nodes(node: dict) -> list[dict]:
    return [node, *(n for child in node.get("Plans", []) for n in _nodes(child))]
