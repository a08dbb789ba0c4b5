"""The claim's answer is read by column name: its columns and ClaimedRun's fields are one list."""

from __future__ import annotations

import pytest

from tasks import outbox
from tasks.db import prepared_cursor
from tasks.transitions import claim
from tests.factories import RunFactory

PARAMS = {
    "worker": "columns-test",
    "limit": 4,
    "prefetch": 0.5,
    "owner_cap": 0,
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

    assert columns(claim.claim_sql(4), PARAMS) == ["row", *fields]
    outcome = claim.Outcome(
        run_id=run.id, attempt=0, status="succeeded", attempt_outcome="succeeded", started_at=None
    )
    finish = claim._finish_params("columns-test", [outcome])
    assert columns(claim.cycle_sql(4), {**PARAMS, **finish}) == ["row", *RECORDED, *fields]
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
