"""Retention: delete history past its window in small batches that never wait on a lock.

Runs are kept per final status (REVIEWERS_RETENTION_DAYS_<STATUS>, ten years by default); their
attempts and notifications go with them. Process rows and dashboard samples are kept for days,
the audit log for REVIEWERS_AUDIT_RETENTION_DAYS (a year by default).
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.db import connection, transaction

from tasks.audit_log import AuditEntry
from tasks.db import db_now
from tasks.models import TERMINAL_STATUSES, Process, QueueSample, Run

logger = logging.getLogger(__name__)


def prune_batch(*, status: str, older_than_days: int, batch: int) -> int:
    """Delete up to `batch` runs in `status` finished more than `older_than_days` ago.

    Returns how many runs were deleted (their attempts and notifications too). Runs are locked
    with FOR UPDATE SKIP LOCKED through run_finished_idx (status, finished_at), oldest
    first: only finished rows are ever locked, so claims (which lock claimable rows) never wait,
    a second reviewer takes the next batch instead of waiting, and a row someone else holds
    (e.g. a retry in progress) is simply left for a later pass.
    """
    if status not in TERMINAL_STATUSES:
        raise ValueError(f"only finished runs are pruned, not {status!r}")
    with transaction.atomic():
        # If a child table is locked, fail this batch rather than queue behind it.
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL lock_timeout = '2s'")
        cutoff = db_now() - timedelta(days=older_than_days)
        ids = list(
            Run.objects.filter(status=status, finished_at__lt=cutoff)
            .order_by("finished_at")
            .select_for_update(skip_locked=True)
            .values_list("id", flat=True)[:batch]
        )
        if not ids:
            return 0
        # The ORM deletes what references these runs (attempts, notifications, and whatever a
        # later app adds) with one DELETE ... WHERE run_id IN (...) per table, then the runs.
        Run.objects.filter(id__in=ids).only("id").delete()
    return len(ids)


def prune_finished_runs(*, retention_days: dict[str, int], batch: int) -> dict[str, int]:
    """One batch per final status; returns {status: runs deleted}. A full batch means more may
    be waiting: the reviewer then goes again at once instead of sleeping."""
    return {
        status: prune_batch(status=status, older_than_days=days, batch=batch)
        for status, days in retention_days.items()
    }


def prune_stopped_processes(*, older_than_days: int) -> int:
    """Forget process rows not seen for `older_than_days` (one row per process start)."""
    cutoff = db_now() - timedelta(days=older_than_days)
    deleted, _ = Process.objects.filter(last_seen_at__lt=cutoff).delete()
    return deleted


def prune_queue_samples(*, older_than_days: int) -> int:
    cutoff = db_now() - timedelta(days=older_than_days)
    deleted, _ = QueueSample.objects.filter(minute__lt=cutoff).delete()
    return deleted


def prune_audit_entries(*, older_than_days: int, batch: int) -> int:
    """Delete up to `batch` audit entries older than `older_than_days` (0: none, ever), oldest
    first; returns how many.

    The log's trigger (tasks/sql/audit.sql) refuses every DELETE unless the transaction declares
    the retention it applies: this declares `older_than_days` (a transaction-local setting)
    and deletes only what is past it by the same clock the trigger reads. Entries are never
    updated, so no lock is waited on; two reviewers may both delete a row, the second finds
    it gone.
    """
    if older_than_days < 1:
        return 0
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT set_config('scheduler.audit_retention_days', %s, true),"
            " transaction_timestamp() - make_interval(days => %s)",
            [str(older_than_days), older_than_days],
        )
        cutoff = cursor.fetchone()[1]
        ids = list(
            AuditEntry.objects.filter(at__lt=cutoff)
            .order_by("at", "id")
            .values_list("id", flat=True)[:batch]
        )
        if ids:
            AuditEntry.objects.filter(id__in=ids).delete()
    return len(ids)
