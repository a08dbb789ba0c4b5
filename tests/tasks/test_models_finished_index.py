"""run_finished_idx (migration 0048): the (status, finished_at) index holds finished runs only,
so each reader's condition must imply its predicate (a final status) for the planner to read it.
With sequential scans off, each reader's plan is one that reads the index: a reader that asked
for a status the predicate does not cover could not."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from reviewers.samples import SQL as REVIEWER_SQL
from scheduler_project.web import metrics
from tasks.admin.dashboard_runs import FINISHED, live_or_finished_since
from tasks.models import Run

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)


def _plan(sql: str, params: object = None, *, ordered: bool = False) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        if ordered:  # the order from the index, not a sort of another partial index's rows
            cursor.execute("SET LOCAL enable_sort = off")
            cursor.execute("SET LOCAL enable_bitmapscan = off")
        cursor.execute("EXPLAIN " + sql, params)
        return "\n".join(row[0] for row in cursor.fetchall())


def _queryset_plan(queryset, *, ordered: bool = False) -> str:
    sql, params = queryset.query.sql_with_params()
    return _plan(sql, params, ordered=ordered)


def test_the_run_list_of_a_final_status_newest_first_reads_it() -> None:
    # The run admin's order for `status__exact` of a final status (run_admin.get_ordering).
    assert "run_finished_idx" in _queryset_plan(
        Run.objects.filter(status="failed").order_by("-finished_at")[:50], ordered=True
    )


def test_retention_reads_it() -> None:
    # reviewers/retention.py, prune_batch's ids.
    queryset = (
        Run.objects.filter(status="succeeded", finished_at__lt=NOW - timedelta(days=30))
        .order_by("finished_at")
        .select_for_update(skip_locked=True)
        .values_list("id", flat=True)[:500]
    )
    assert "run_finished_idx" in _queryset_plan(queryset)


def test_the_dashboards_finishes_and_live_or_finished_counts_read_it() -> None:
    finishes = Run.objects.filter(
        status__in=FINISHED, finished_at__gte=NOW - timedelta(hours=1), finished_at__lt=NOW
    )
    assert "run_finished_idx" in _queryset_plan(finishes)
    since = Run.objects.filter(live_or_finished_since(NOW - timedelta(hours=1)))
    assert "run_finished_idx" in _queryset_plan(since)


def test_metrics_lateness_and_the_reviewers_sample_read_it() -> None:
    params = {"window": 300, "sample": 5000, "buckets": [0.1, 1.0]}
    # Newest first: with sorts off, only the index gives that order (another index of few
    # entries could otherwise look cheaper, after other tests' statistics).
    assert "run_finished_idx" in _plan(metrics._LATENESS_SQL, params, ordered=True)
    assert "run_finished_idx" in _plan(REVIEWER_SQL["record_queue_sample"])


def test_a_status_not_final_cannot_read_it() -> None:
    # The claim's statuses: the predicate is not implied, so the index is no way to them.
    plan = _queryset_plan(Run.objects.filter(status="scheduled").order_by("finished_at"))
    assert "run_finished_idx" not in plan
