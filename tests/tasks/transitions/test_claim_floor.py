"""The claim floor (claim.claim_floor; `since` in tasks/sql/claim.sql): a worker's claims read
the claimable runs from it, so the index entries an old snapshot keeps from vacuum are not read
again on every claim."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from uuid import UUID

import psycopg
import pytest
from django.conf import settings
from django.db import connection, transaction

from tasks import outbox
from tasks.models import Run
from tasks.transitions import claim
from tests.conftest import database_url
from tests.factories import RunFactory, TaskFactory
from tests.generic_plans import generic_plan

pytestmark = pytest.mark.django_db(transaction=True)
MARGIN = timedelta(seconds=10)


def take(floor: claim.Floor) -> list[UUID]:
    claimed = claim.claim_runs(worker="w", limit=8, prefetch_seconds=0, owner_cap=0, floor=floor)
    return [run.id for run in claimed]


def test_the_floor_is_the_earliest_claimable_run_or_now_less_a_margin() -> None:
    now = datetime.now(UTC)
    before = claim.claim_floor(margin_seconds=10)
    assert before.since is not None
    assert now - MARGIN - timedelta(seconds=5) < before.since < now - MARGIN + timedelta(seconds=5)
    waiting = RunFactory(scheduled_at=now - timedelta(hours=1))
    started = now - timedelta(hours=2)  # a running run does not hold the claimable floor back
    RunFactory(status="running", worker="w", attempt=1, started_at=started, heartbeat_at=now)
    assert claim.claim_floor(margin_seconds=10).since == waiting.execute_at - MARGIN


def test_a_claim_from_a_floor_takes_no_run_due_before_it() -> None:
    now = datetime.now(UTC)
    early = RunFactory(scheduled_at=now - timedelta(seconds=60))
    late = RunFactory(scheduled_at=now - timedelta(seconds=1))
    assert take(claim.Floor(since=now - timedelta(seconds=30))) == [late.pk]
    assert take(claim.NO_FLOOR) == [early.pk]  # the next floor reaches back to it


def _nodes(plan: dict) -> Iterator[dict]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def _blocks_read_by_scans(floor: claim.Floor) -> int:
    """Buffers the claim's scans of the claimable runs read (EXPLAIN, undone)."""
    params = {
        "worker": "w",
        "limit": 1,
        "prefetch": 0.0,
        "owner_cap": 0,  # the per-owner count, which reads run_running_idx whole, not asked
        "window": settings.NOTIFICATIONS_RETRY_WINDOW_SECONDS,
        "channel": outbox.NOTIFICATION_CHANNEL,
        **floor.params(),
        **claim.NO_LIMIT.params(),
    }
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + claim.claim_sql(1), params)
        [[explained]] = cursor.fetchall()
        transaction.set_rollback(True)
    if isinstance(explained, str):
        explained = json.loads(explained)
    scans = [n for n in _nodes(explained[0]["Plan"]) if n.get("Index Name") == "run_claimable_idx"]
    assert scans
    return sum(n["Shared Hit Blocks"] + n["Shared Read Blocks"] for n in scans)


def test_under_an_old_snapshot_a_claim_from_the_floor_skips_the_runs_claimed_since() -> None:
    """While another transaction holds its snapshot, the entry of every run claimed since stays
    in run_claimable_idx (vacuum cannot remove it, nor a scan mark it dead); a claim from each
    priority's first entry reads them all, one from the floor does not."""
    task = TaskFactory()
    hour_ago = datetime.now(UTC) - timedelta(hours=1)
    with psycopg.connect(database_url()) as holder:  # not autocommit: the snapshot stays
        holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        holder.execute("SELECT 1 FROM tasks_run LIMIT 1").fetchall()
        Run.objects.bulk_create(
            RunFactory.build(task=task, scheduled_at=hour_ago + timedelta(seconds=i))
            for i in range(4000)
        )
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE tasks_run SET status = 'running', worker = 'gone', attempt = 1,"
                " started_at = execute_at, heartbeat_at = execute_at WHERE task_id = %s",
                [task.pk],
            )
            cursor.execute(
                "UPDATE tasks_run SET status = 'succeeded', finished_at = now() WHERE task_id = %s",
                [task.pk],
            )
            cursor.execute("VACUUM ANALYZE tasks_run")
        fresh = RunFactory(scheduled_at=datetime.now(UTC) - timedelta(seconds=1))
        floor = claim.claim_floor(margin_seconds=10)
        from_first_entry = _blocks_read_by_scans(claim.NO_FLOOR)
        from_floor = _blocks_read_by_scans(floor)
    assert from_first_entry > 80  # an index page and a heap page per few dozen runs
    assert from_floor < from_first_entry / 4, (from_floor, from_first_entry)
    assert take(floor) == [fresh.pk]


def _claim_params(floor: claim.Floor) -> dict:
    """The worker's parameters for a claim of one run (its owner cap: the per-owner count is in
    the plan, as in the worker's)."""
    return {
        "worker": "w",
        "limit": 1,
        "prefetch": 0.0,
        "owner_cap": settings.TASKS_OWNER_MAX_RUNNING,
        "window": settings.NOTIFICATIONS_RETRY_WINDOW_SECONDS,
        "channel": outbox.NOTIFICATION_CHANNEL,
        **floor.params(),
        **claim.NO_LIMIT.params(),
    }


def _generic_plan(floor: claim.Floor, *, analyze: bool) -> dict:
    """The claim's generic plan, as the worker's (tests/generic_plans.py)."""
    options = "ANALYZE, BUFFERS, FORMAT JSON" if analyze else "FORMAT JSON"
    return generic_plan(claim.claim_sql(2), _claim_params(floor), options=options)


def _candidates_scans(plan: dict) -> list[dict]:
    """The candidates' scans of tasks_run: one per priority, each bounded by `p.priority`."""
    return [
        node
        for node in _nodes(plan["Plan"])
        if node.get("Relation Name") == "tasks_run"
        and "p.priority" in node.get("Index Cond", "") + node.get("Filter", "")
    ]


def _blocks(node: dict) -> int:
    return node["Shared Hit Blocks"] + node["Shared Read Blocks"]


def _own_blocks(node: dict) -> int:
    """A node's buffers less its children's: a subplan its filter runs first (the per-owner
    count, `capped`) is counted in the node that runs it."""
    return _blocks(node) - sum(_blocks(child) for child in node.get("Plans", []))


def test_no_index_but_run_claimable_idx_can_serve_the_candidates_scan() -> None:
    """Without run_claimable_idx the candidates' conditions leave the planner no index of
    tasks_run to read, only the table: so however run_claimable_idx bloats under an old
    snapshot, no other index's range of every run inserted since (run_status_finished_idx's
    `scheduled` range, which the planner chose in the ten-minute held run) takes its place."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("DROP INDEX run_claimable_idx")
        scans = _candidates_scans(_generic_plan(claim.NO_FLOOR, analyze=False))
        transaction.set_rollback(True)
    assert scans
    assert {(scan["Node Type"], scan.get("Index Name")) for scan in scans} == {("Seq Scan", None)}


def test_under_an_old_snapshot_the_workers_generic_claim_reads_few_buffers() -> None:
    """The worker's claim as it runs it (its generic plan, its owner cap) after 4,000 runs were
    claimed and finished under a held snapshot: the candidates' scan is run_claimable_idx from
    the floor, and it reads a few buffers a priority, not one per run claimed since."""
    task = TaskFactory()
    hour_ago = datetime.now(UTC) - timedelta(hours=1)
    with psycopg.connect(database_url()) as holder:  # not autocommit: the snapshot stays
        holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        holder.execute("SELECT 1 FROM tasks_run LIMIT 1").fetchall()
        for batch in range(4):  # vacuumed between batches, as the bench's vacuum every 30 s
            Run.objects.bulk_create(
                RunFactory.build(task=task, scheduled_at=hour_ago + timedelta(seconds=i * 0.8))
                for i in range(batch * 1000, (batch + 1) * 1000)
            )
            with connection.cursor() as cursor:
                cursor.execute(
                    "UPDATE tasks_run SET status = 'running', worker = 'gone', attempt = 1,"
                    " started_at = execute_at, heartbeat_at = execute_at"
                    " WHERE task_id = %s AND status = 'scheduled'",
                    [task.pk],
                )
                cursor.execute(
                    "UPDATE tasks_run SET status = 'succeeded', finished_at = now()"
                    " WHERE task_id = %s AND status = 'running'",
                    [task.pk],
                )
                cursor.execute("VACUUM ANALYZE tasks_run")
        fresh = RunFactory(scheduled_at=datetime.now(UTC) - timedelta(seconds=1))
        from_floor = _candidates_scans(
            _generic_plan(claim.claim_floor(margin_seconds=10), analyze=True)
        )
        from_first_entry = _candidates_scans(_generic_plan(claim.NO_FLOOR, analyze=True))
    assert {scan.get("Index Name") for scan in from_floor} == {"run_claimable_idx"}, from_floor
    read = sum(_own_blocks(scan) for scan in from_floor)
    read_whole = sum(_own_blocks(scan) for scan in from_first_entry)
    # 10 priorities, a descent and a leaf page each; the runs within the floor's margin.
    assert read < 40, (read, read_whole)
    assert read_whole > 3 * read, (read, read_whole)
    assert take(claim.claim_floor(margin_seconds=10)) == [fresh.pk]
