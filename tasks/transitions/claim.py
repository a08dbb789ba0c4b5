"""The worker's transitions: claim runs, record their outcomes (fenced), hold them (heartbeats).

Plain SQL (tasks/sql/claim.sql) because these statements run thousands of times a second and
each must be exactly one round trip; docs/architecture.md describes the claim they implement. The
claim and the outcome write run as prepared statements (tasks/db.py `prepared_cursor`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.conf import settings
from psycopg.rows import dict_row

from scheduler_project.sql import queries
from tasks import outbox
from tasks.db import DatabaseClock, prepared_cursor
from tasks.ids import idempotency_key
from tasks.models import TERMINAL_STATUSES
from tasks.schedules import RUN_ALL_CAP

SQL = queries("tasks", "claim.sql", run_all_cap=RUN_ALL_CAP)
# The earliest claimable execute_at (ten index probes); /health reads it too.
DUE_WAITING_SINCE_SQL = SQL["due_waiting_since"]
UNLIMITED = 2**62  # a worker's capacity when it declares none (above any request allowed)


@dataclass(frozen=True)
class Capacity:
    """What a worker offers (`*_total`) and what its runs in flight leave (`*_free`)."""

    cpu_total: int = UNLIMITED  # millicores
    memory_total: int = UNLIMITED  # bytes
    cpu_free: int = UNLIMITED
    memory_free: int = UNLIMITED
    executables: bool = True  # False: it has no sandbox now, and claims no executable run

    def params(self) -> dict[str, int]:
        """The claim's parameters (`executables` is written into the statement: claim_sql)."""
        return {
            "cpu_total": self.cpu_total,
            "memory_total": self.memory_total,
            "cpu_free": self.cpu_free,
            "memory_free": self.memory_free,
        }


NO_LIMIT = Capacity()


@dataclass(frozen=True)
class Floor:
    """Where a worker's claims start reading the claimable runs: those due at or after
    `since` (claim.sql, `claim_floor`); None: from the first."""

    since: datetime | None = None

    def params(self) -> dict[str, datetime | None]:
        return {"since": self.since}


NO_FLOOR = Floor()


@dataclass
class ClaimedRun:
    """A claimed run, read by column name from the claim's `claimed_columns` (claim.sql)."""

    id: UUID
    task_id: UUID
    scheduled_at: datetime
    execute_at: datetime
    attempt: int
    max_attempts: int
    kind: str
    payload: dict
    executable: str
    timeout: float | None
    backoff_base: float
    backoff_cap: float
    claimed_at: datetime  # database clock at claim time
    overlap: str
    priority: int
    cpu_millis: int  # the run's requests: held from the worker's capacity while in flight
    memory_bytes: int

    @property
    def idempotency_key(self) -> str:
        return idempotency_key(self.task_id, self.scheduled_at)

    def environment(self) -> dict[str, str]:
        """The payload's `env` plus the SCHEDULER_* variables every executable run gets."""
        env = {str(k): str(v) for k, v in (self.payload.get("env") or {}).items()}
        env.update(
            SCHEDULER_TASK_ID=str(self.task_id),
            SCHEDULER_RUN_ID=str(self.id),
            SCHEDULER_SCHEDULED_AT=self.scheduled_at.isoformat(),
            SCHEDULER_ATTEMPT=str(self.attempt),
            SCHEDULER_IDEMPOTENCY_KEY=self.idempotency_key,
        )
        return env


class ClaimedRuns(list[ClaimedRun]):
    """The runs a claim took; `held_back` when the worker's free capacity held due runs back
    (they are `waiting_for_resource` now, and the worker waits for one of its runs to end);
    `rate_wait` when rate limits held due runs: in how many seconds (database clock) the first
    of them may start; `passed_over` when it had slots free and passed over a concurrency key
    another claim held (that claim commits within milliseconds)."""

    held_back: bool = False
    rate_wait: float | None = None
    passed_over: bool = False


def claim_runs(
    *,
    worker: str,
    limit: int,
    prefetch_seconds: float,
    owner_cap: int,
    capacity: Capacity = NO_LIMIT,
    floor: Floor = NO_FLOOR,
) -> ClaimedRuns:
    """Claim up to `limit` claimable runs due within `prefetch_seconds`, highest priority first,
    while their requests fit the worker's free `capacity` (strict priority: see claim.sql);
    with a `floor` (the worker's `claim_floor`), only runs due at or after its `since`.

    One short transaction; SKIP LOCKED lets any number of workers claim concurrently without
    waiting on each other and without ever claiming the same run twice.
    """
    if limit <= 0:
        return ClaimedRuns()
    params = {
        "worker": worker,
        "limit": limit,
        "prefetch": prefetch_seconds,
        "owner_cap": owner_cap,
        "window": settings.NOTIFICATIONS_RETRY_WINDOW_SECONDS,
        "channel": outbox.NOTIFICATION_CHANNEL,
        **floor.params(),
        **capacity.params(),
    }
    with prepared_cursor(row_factory=dict_row) as cursor:  # one statement: its own transaction
        cursor.execute(claim_sql(_candidates(limit, owner_cap), capacity.executables), params)
        rows = cursor.fetchall()
    return _claimed_runs(rows)


def _candidates(limit: int, cap: int) -> int:
    # With a cap, look at twice the batch so one owner's runs do not crowd out everyone else's.
    wanted = limit * 2 if cap > 0 else limit
    # Rounded up to a power of two: the LIMIT is written into the statement (see claim_sql), and
    # a handful of sizes keeps the number of prepared statements per connection small.
    return 1 << (wanted - 1).bit_length()


@functools.cache
def claim_sql(candidates: int, executables: bool = True) -> str:
    """The claim statement for batches of up to `candidates` candidates, for a worker that can
    (or, with `executables` false, cannot) run executables: claim.sql says why that is written
    into the statement too.

    The candidates' LIMIT is a literal, not a parameter. With `LIMIT $n` PostgreSQL costs the
    statement's generic plan (prepared once per connection, see db.prepared_cursor) as if a
    tenth of the due runs were wanted, finds it dearer than a plan for the actual values, and
    plans the statement again on every execution: a third of the database's time for the
    worker's cycle with 10 million finished runs in the table (docs/benchmarks.md)."""
    return SQL.render("claim", candidates=candidates, executables=int(executables))


@functools.cache
def cycle_sql(candidates: int, executables: bool = True) -> str:
    """The record-and-claim statement (see claim_sql for the literals)."""
    return SQL.render("cycle", candidates=candidates, executables=int(executables))


CLAIMED_FIELDS = tuple(f.name for f in dataclasses.fields(ClaimedRun))


def _claimed_runs(rows: list[dict[str, Any]]) -> ClaimedRuns:
    """The claimed runs of a claim's or cycle's answer (by name: `claimed_columns`);
    `held_back` when its `held` row is there."""
    claimed = ClaimedRuns(
        ClaimedRun(**{name: row[name] for name in CLAIMED_FIELDS})
        for row in rows
        if row["row"] == "claimed"
    )
    claimed.held_back = any(row["row"] == "held" for row in rows)
    claimed.rate_wait = next((row["rate_wait"] for row in rows if row["row"] == "rate"), None)
    claimed.passed_over = any(row["row"] == "passed" for row in rows)
    for run in claimed:
        if isinstance(run.payload, str):  # Django's psycopg setup leaves jsonb undecoded
            run.payload = json.loads(run.payload)
    if not claimed:
        return claimed
    # One claim time for the batch, the earliest: each row's clock_timestamp() differs by
    # microseconds, in no particular order, and start times are counted from it (the worker).
    at = min(run.claimed_at for run in claimed)
    for run in claimed:
        run.claimed_at = at
    # Start order: runs already due first, highest priority first; runs claimed ahead of their
    # time by when they are due.
    claimed.sort(key=lambda r: (max(r.execute_at, at), -r.priority, r.execute_at))
    return claimed


def record_and_claim(
    *,
    worker: str,
    outcomes: list[Outcome],
    limit: int,
    prefetch_seconds: float,
    owner_cap: int,
    capacity: Capacity = NO_LIMIT,
    floor: Floor = NO_FLOOR,
) -> tuple[list[tuple[UUID, UUID, str]], ClaimedRuns]:
    """Record finished runs and claim runs for the freed slots: one statement, one commit.

    The worker's steady state is "some runs finished, as many slots free". One statement in
    autocommit is one round trip and one WAL flush per cycle, however large the batch. Atomic:
    if it fails nothing is recorded and nothing claimed, and the caller keeps its outcomes.
    """
    if not outcomes:
        return [], claim_runs(
            worker=worker,
            limit=limit,
            prefetch_seconds=prefetch_seconds,
            owner_cap=owner_cap,
            capacity=capacity,
            floor=floor,
        )
    if limit <= 0:
        return record_outcomes(worker=worker, outcomes=outcomes), ClaimedRuns()
    params = _finish_params(worker, outcomes)
    params.update(
        limit=limit,
        prefetch=prefetch_seconds,
        owner_cap=owner_cap,
        **floor.params(),
        **capacity.params(),
    )
    # No transaction block: in autocommit the single statement is its own transaction.
    with prepared_cursor(row_factory=dict_row) as cursor:
        cursor.execute(cycle_sql(_candidates(limit, owner_cap), capacity.executables), params)
        rows = cursor.fetchall()
    recorded = [_recorded(row) for row in rows if row["row"] == "recorded"]
    return recorded, _claimed_runs(rows)


def seconds_until_next_due(
    capacity: Capacity = NO_LIMIT,
    *,
    later_than: float | None = None,
    since: datetime | None = None,
    clock: DatabaseClock | None = None,
) -> float | None:
    """Seconds (database clock) until the earliest claimable run that fits `capacity`'s totals
    is due; None when none is. With `later_than`, only runs due more than that many seconds
    from now count: a worker whose capacity held due runs back waits for what comes next. With
    `since` (the worker's `claim_floor`), only runs due at or after it count. `clock` learns
    from the answer where the database clock stands."""
    params = {
        "cpu_total": capacity.cpu_total,
        "memory_total": capacity.memory_total,
        "later_than": -1e9 if later_than is None else later_than,
        "since": since,
    }
    # Prepared like the claim: an idle worker asks after every claim, and planning the
    # statement cost more than running it (bench/NOTEBOOK.md, "Planned once per connection").
    with prepared_cursor() as cursor:
        cursor.execute(_idle_sql("seconds_until_next_due", capacity.executables), params)
        seconds, read = cursor.fetchall()[0]
    if clock is not None:
        clock.observe(read, time.monotonic())
    return seconds


def claim_floor(capacity: Capacity = NO_LIMIT, *, margin_seconds: float) -> Floor:
    """Where a worker's claims may start reading: the earliest claimable run that fits
    `capacity`'s totals (or now), less `margin_seconds` (claim.sql, `claim_floor`). A read, no
    lock: a run that becomes claimable behind it afterwards is claimed once the worker finds
    its floor again (the worker does once it is a second old, at its next claim or poll)."""
    params = {
        "cpu_total": capacity.cpu_total,
        "memory_total": capacity.memory_total,
        "margin": margin_seconds,
    }
    with prepared_cursor() as cursor:
        cursor.execute(_idle_sql("claim_floor", capacity.executables), params)
        return Floor(since=cursor.fetchall()[0][0])


def table_pages() -> tuple[int, ...]:
    """The pages of the tables the worker's prepared statements read (claim.sql, `table_pages`)."""
    with prepared_cursor() as cursor:
        cursor.execute(SQL["table_pages"], {})
        return tuple(cursor.fetchall()[0])


@functools.cache
def _idle_sql(name: str, executables: bool) -> str:
    """`seconds_until_next_due` or `claim_floor` for a worker that can (or cannot) run
    executables: written in, as in claim_sql, because as a parameter the generic plan costs the
    task lookup that a plan for `true` drops, and PostgreSQL's `auto` planned it again on every
    call."""
    return SQL.render(name, executables=int(executables))


@dataclass(frozen=True)
class Outcome:
    """What one attempt of a claimed run came to; `retry_in` is set when it will be retried."""

    run_id: UUID
    attempt: int
    status: str  # succeeded | failed | scheduled (retry) | cancelled
    attempt_outcome: str  # Attempt.Outcome value
    started_at: datetime | None
    error: str = ""
    output: str = ""
    exit_code: int | None = None
    http_status: int | None = None
    retry_in: float = 0.0


def record_outcomes(*, worker: str, outcomes: list[Outcome]) -> list[tuple[UUID, UUID, str]]:
    """Record a batch of outcomes; returns (run id, task id, status) of those recorded.

    Fenced: a run is only updated while it is still `running` under this worker and attempt. A
    run the reviewer took back, or a user cancelled, is left alone and its late result dropped.
    One statement updates the runs, inserts their attempt rows, completes finished tasks, adds
    to the /metrics counters, queues the notifications (outbox) and wakes workers for retries:
    all of it commits together or not at all.
    """
    if not outcomes:
        return []
    with prepared_cursor(row_factory=dict_row) as cursor:  # one statement: its own transaction
        cursor.execute(SQL["record"], _finish_params(worker, outcomes))
        return [_recorded(row) for row in cursor.fetchall()]


def _finish_params(worker: str, outcomes: list[Outcome]) -> dict[str, Any]:
    return {
        "worker": worker,
        "terminal": list(TERMINAL_STATUSES),
        "window": settings.NOTIFICATIONS_RETRY_WINDOW_SECONDS,
        "channel": outbox.NOTIFICATION_CHANNEL,
        "ids": [o.run_id for o in outcomes],
        "attempts": [o.attempt for o in outcomes],
        "statuses": [o.status for o in outcomes],
        "retry_in": [o.retry_in for o in outcomes],
        "started": [o.started_at for o in outcomes],
        "errors": [o.error for o in outcomes],
        "outputs": [o.output for o in outcomes],
        "exit_codes": [o.exit_code for o in outcomes],
        "http_statuses": [o.http_status for o in outcomes],
        "outcomes": [o.attempt_outcome for o in outcomes],
    }


def _recorded(row: dict[str, Any]) -> tuple[UUID, UUID, str]:
    """(run id, task id, status) of a recorded run (`recorded_columns`)."""
    return row["recorded_id"], row["recorded_task_id"], row["recorded_status"]


def renew_heartbeats(cursor: Any, *, worker: str, run_ids: Iterable[UUID]) -> set[UUID]:
    """Renew the heartbeat of the runs this worker knows it holds; return the ids still held.

    One statement per worker process, however many runs it holds. A run missing from the
    answer was cancelled or taken back by the reviewer: the worker must stop its payload.
    Only the runs named are renewed: a claim that committed while its answer was lost (the
    primary died between the two) is held in the database by a worker that never heard of it,
    and must go stale, so the reviewer returns it to the queue.
    """
    cursor.execute(SQL["renew_heartbeats"], [list(run_ids), worker])
    return {row[0] for row in cursor.fetchall()}
