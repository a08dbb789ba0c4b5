"""The reviewer's transitions: rescue runs of dead workers, flag starved runs and runs no live
worker can hold. Each is one statement (tasks/sql/rescue.sql)."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.db import connection, transaction

from scheduler_project.sql import queries
from tasks import counters, events, outbox
from tasks.db import RUN_DUE_CHANNEL, notify
from tasks.transitions.claim import UNLIMITED
from tasks.transitions.completion import complete_finished_tasks

logger = logging.getLogger(__name__)

SQL = queries("tasks", "rescue.sql")
EXPECT_SQL = queries("tasks", "expect.sql")
STARVED_BATCH = 500  # runs flagged past the start SLA per reviewer pass


@dataclass(frozen=True)
class RescueResult:
    rescued: int
    failed: int


def rescue_stuck_runs(*, after_seconds: float, batch: int = 500) -> RescueResult:
    """Return runs whose heartbeat is older than `after_seconds` to the queue (or to `failed`
    when their attempts are spent), recording the rescue as that attempt's outcome.

    Row locks with SKIP LOCKED plus the `status = 'running'` predicate make this a compare-and-
    swap: two reviewers never rescue the same run, and a worker's fenced outcome write racing this
    either lands first (the run is no longer running) or is dropped (attempt/worker changed).
    """
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(SQL["rescue"], {"after": after_seconds, "batch": batch})
        rows = cursor.fetchall()
        # Outbox: `stuck` (and `retries_exhausted` when spent) commit with the rescue.
        outbox.enqueue(cursor, events=events.rescue_events(rows))
        # /metrics counters: a rescue is an attempt's outcome, and a final `failed` when spent.
        counters.count_events(cursor, process=f"reviewer:{os.getpid()}", events=_counted(rows))
        if any(status == "scheduled" for _, status, _ in rows):
            cursor.execute("SELECT pg_notify('scheduler_run_due', '')")
        failed_tasks = [task_id for _, status, task_id in rows if status == "failed"]
        if failed_tasks:
            _judge_failures(cursor, [(r, t) for r, status, t in rows if status == "failed"])
            complete_finished_tasks(task_ids=failed_tasks)
    failed = sum(1 for _, status, _ in rows if status == "failed")
    return RescueResult(rescued=len(rows) - failed, failed=failed)


def _judge_failures(cursor: Any, failed: list[tuple[UUID, UUID]]) -> None:
    """The rescued runs that ended `failed`, (run id, task id), against their tasks' expected
    failure streak (tasks/sql/expect.sql): `failing` alerts queued and counted here."""
    cursor.execute(
        EXPECT_SQL["rescued_failures"],
        {"runs": [r for r, _ in failed], "tasks": [t for _, t in failed]},
    )
    alerts = [(run_id, task_id, None, event) for run_id, task_id, event in cursor.fetchall()]
    outbox.enqueue(cursor, events=alerts)
    counters.count_events(
        cursor,
        process=f"reviewer:{os.getpid()}",
        events=[(task_id, "alert", event) for _, task_id, _, event in alerts],
    )


def _counted(rows: Iterable[tuple[UUID, str, UUID]]) -> Iterator[tuple[UUID, str, str]]:
    for _, status, task_id in rows:
        yield task_id, "attempt", "rescued"
        if status == "failed":
            yield task_id, "finished", "failed"


def flag_starved_runs(*, sla_seconds: float, batch: int = STARVED_BATCH) -> int:
    """Mark up to `batch` due runs not started within the SLA `waiting_for_resource` (still
    claimable); the rest wait for the next pass.

    Only `status = 'scheduled'` runs no other transaction has locked: a run a worker claims
    meanwhile becomes `running` and is left alone; two reviewers flag disjoint runs, each once.
    """
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(SQL["flag_starved"], {"sla": sla_seconds, "batch": batch})
        # Outbox: a `stuck` notification per flagged run, in the same transaction.
        rows = cursor.fetchall()
        outbox.enqueue(cursor, events=events.starved_events(rows))
        return len(rows)


def mark_unplaceable_runs(*, dead_after_seconds: float) -> list[tuple[UUID, str]]:
    """Mark due runs whose requests no live worker offers `waiting_for_resource`, with a reason
    ("no live worker offers cpu=64"); schedule again those a live worker now offers enough for.
    Returns (run id, reason) of the runs changed ("" for those scheduled again).

    The claim never takes such a run (it is over every worker's total) and so never blocks on
    it. Compare-and-swap on claimable rows under SKIP LOCKED: a run being claimed is skipped
    and seen again on the next pass; several reviewers write the same reason.
    """
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            SQL["mark_unplaceable"], {"dead": dead_after_seconds, "unlimited": UNLIMITED}
        )
        rows = cursor.fetchall()
        if any(reason == "" for _, reason in rows):
            notify(RUN_DUE_CHANNEL)
    return rows
