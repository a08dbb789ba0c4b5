"""Small database helpers: the database clock and NOTIFY channels shared by every role."""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections import deque
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import psycopg
from django.db import (
    DEFAULT_DB_ALIAS,
    InterfaceError,
    OperationalError,
    connection,
    connections,
)
from django.db.backends.base.base import BaseDatabaseWrapper
from psycopg.rows import RowFactory

from scheduler_project.postgresql.base import NeverCancelConnection
from tasks.outages import DATABASE

logger = logging.getLogger(__name__)

# Channels: a run became claimable (workers wake); a task's plan changed (schedulers wake);
# a running run was cancelled or taken back (the worker holding it checks at once).
RUN_DUE_CHANNEL = "scheduler_run_due"
TASK_CHANGED_CHANNEL = "scheduler_task_changed"
RUN_CANCEL_CHANNEL = "scheduler_run_cancel"


# SQLSTATE 25006: "cannot execute ... in a read-only transaction" (a standby, or a demoted or
# fenced primary still answering).
READ_ONLY_SQLSTATE = "25006"


def is_unavailable(exc: BaseException) -> bool:
    """True for the errors of a database that is down, unreachable or no longer the primary:
    worth retrying once the failover is over, and never the request's fault (the API answers
    503 with Retry-After). Django wraps psycopg's errors and keeps the original as `__cause__`."""
    lost = (OperationalError, InterfaceError, psycopg.OperationalError, psycopg.InterfaceError)
    if isinstance(exc, lost):
        return True
    cause = exc if isinstance(exc, psycopg.Error) else exc.__cause__
    return isinstance(cause, psycopg.Error) and cause.sqlstate == READ_ONLY_SQLSTATE


def db_now() -> datetime:
    """The database clock: every process compares times against this one clock."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        return cursor.fetchone()[0]


class DatabaseClock:
    """Where this process's monotonic clock stands against the database clock, learnt from
    statements' answers, so that a run claimed ahead of its time starts when the database clock
    says it is due and never before.

    A statement answered at monotonic instant `a` read the database clock as `t` at some
    instant before `a`: so database time minus monotonic time is at least `t - a`. Each answer
    is such a lower bound, and the largest bound of the last `keep` seconds, less `drift` per
    second of its age, is the tightest one still safe. A claim's own answer is a loose one (its
    clock reading comes before the rest of the statement and the commit); a read-only statement
    that reads the clock last, as the idle worker's `seconds_until_next_due`, is answered within
    a round trip of its reading."""

    def __init__(self, *, keep: float = 2.0, drift: float = 100e-6) -> None:
        self.keep = keep
        self.drift = drift  # seconds per second: two hosts' clocks apart, far above NTP's
        # (t - a + drift * a, a), oldest first: a bound's worth at any later instant is its
        # first member less drift * that instant, so a newer bound worth as much makes the
        # older ones useless and they are dropped. What is kept falls in worth from the left:
        # the tightest is the first, and a claim costs no scan of a busy worker's claims.
        self.bounds: deque[tuple[float, float]] = deque()

    def observe(self, read: datetime, answered: float) -> None:
        """A statement answered at monotonic `answered` read the database clock as `read`."""
        worth = read.timestamp() - answered + self.drift * answered
        while self.bounds and self.bounds[-1][0] <= worth:
            self.bounds.pop()
        self.bounds.append((worth, answered))
        while self.bounds[0][1] < answered - self.keep:
            self.bounds.popleft()

    def forget(self) -> None:
        """After a lost connection: the next server (a failover's) may keep another clock."""
        self.bounds.clear()

    def instant(self, read: datetime, answered: float) -> float:
        """The monotonic instant to take as the one at which the database clock read `read`
        (a statement answered at `answered`): the latest the bounds allow, never earlier than
        the true one, and never later than `answered`."""
        self.observe(read, answered)
        return read.timestamp() - (self.bounds[0][0] - self.drift * answered)


class PreparedCursor:
    """Executes each statement as a prepared statement of this connection (see
    `prepared_cursor`); logged like Django's own queries when query logging is on."""

    def __init__(self, cursor: psycopg.Cursor, wrapper: BaseDatabaseWrapper) -> None:
        self.cursor = cursor
        self.wrapper = wrapper

    def execute(self, sql: str, params: dict[str, Any]) -> None:
        # Through Django's execute wrappers, as connection.cursor() runs them: the API's request
        # deadline (scheduler_project/web/deadline.py) is one.
        execute: Any = self._execute
        for wrapper in reversed(self.wrapper.execute_wrappers):
            execute = functools.partial(wrapper, execute)
        execute(sql, params, False, {"connection": self.wrapper, "cursor": self})

    def _execute(self, sql: str, params: dict[str, Any], many: bool, context: Any) -> None:
        started = time.monotonic()
        try:
            self.cursor.execute(sql, params, prepare=True)
        finally:
            if self.wrapper.queries_logged:  # CaptureQueriesContext, DEBUG
                took = time.monotonic() - started
                self.wrapper.queries_log.append({"sql": sql, "time": f"{took:.3f}"})

    def fetchall(self) -> list[Any]:
        return self.cursor.fetchall()


@contextlib.contextmanager
def prepared_cursor(
    using: str = DEFAULT_DB_ALIAS, *, row_factory: RowFactory[Any] | None = None
) -> Iterator[PreparedCursor]:
    """A cursor on Django's connection for the hot path's statements: each is parsed and planned
    once per connection instead of on every execution, which took the worker's cycle statement
    from about 9 ms to 3-5 ms on a 2-core machine (bench/NOTEBOOK.md). Django binds parameters
    on the client and turns prepared statements off (`prepare_threshold=None`), so this uses
    psycopg's server-binding cursor and a threshold no query reaches: only statements run
    through this cursor are prepared. Errors come out as Django's DatabaseError, as from
    `connection.cursor()`. (Behind PgBouncer, transaction pooling needs PgBouncer 1.21+ with
    `max_prepared_statements` set, or DATABASE_PREPARED_STATEMENTS=false.) `using`: the
    database alias (the API's reads may use the replica); `row_factory`: psycopg's, e.g.
    `dict_row` to read columns by name."""
    wrapper = connections[using]
    wrapper.close_if_health_check_failed()  # as Django's own cursor(): once per request
    wrapper.ensure_connection()
    raw = wrapper.connection
    cursor_class: Any = psycopg.Cursor
    with wrapper.wrap_database_errors, cursor_class(raw, row_factory=row_factory) as cursor:
        # DATABASE_PREPARED_STATEMENTS=false: nothing is prepared (a PgBouncer before 1.21 in
        # transaction mode hands the next transaction another server, without the statement).
        if raw.prepare_threshold is None and wrapper.settings_dict.get("PREPARED_STATEMENTS", True):
            raw.prepare_threshold = 2**31 - 1
        yield PreparedCursor(cursor, wrapper)


def forget_prepared(using: str = DEFAULT_DB_ALIAS) -> None:
    """Drop the statements `prepared_cursor` prepared on this thread's connection (DEALLOCATE
    ALL, which psycopg also reads as forgetting its own list of them): each is prepared and
    planned again at its next execution. A generic plan is made once, for the tables' sizes and
    statistics of that moment, and kept until something invalidates it: one made while a table
    was nearly empty scans it whole however large it grows. Nothing to do without a connection
    or with prepared statements off (DATABASE_PREPARED_STATEMENTS=false)."""
    wrapper = connections[using]
    raw = wrapper.connection
    if raw is None or raw.prepare_threshold is None:
        return
    cursor_class: Any = psycopg.Cursor  # server-side binding: psycopg's prepared list sees it
    with wrapper.wrap_database_errors, cursor_class(raw) as cursor:
        cursor.execute("DEALLOCATE ALL")


def notify(channel: str, payload: str = "") -> None:
    """NOTIFY inside the current transaction: delivered on commit, dropped on rollback."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_notify(%s, %s)", [channel, payload])


def connect(application_name: str = "scheduler-listen") -> psycopg.Connection:
    """A dedicated autocommit connection with Django's parameters (for LISTEN and heartbeats);
    like Django's own, it never sends a cancel request (scheduler_project/postgresql/base.py)."""
    params = connection.get_connection_params()
    for key in ("cursor_factory", "context", "prepare_threshold", "server_side_binding"):
        params.pop(key, None)
    params["application_name"] = application_name
    params.setdefault("connect_timeout", 5)
    conn = NeverCancelConnection.connect(autocommit=True, **params)
    DATABASE.recovered(what=application_name)
    return conn


class Listener(threading.Thread):
    """Sets `wake` whenever a NOTIFY arrives on one of `channels`; reconnects on failure."""

    def __init__(self, channels: list[str], wake: threading.Event) -> None:
        super().__init__(name="listener", daemon=True)
        self.channels = channels
        self.wake = wake
        self.stopping = threading.Event()

    def stop(self) -> None:
        self.stopping.set()

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                with connect() as conn:
                    for channel in self.channels:
                        conn.execute(f"LISTEN {channel}")
                    self.wake.set()  # anything missed while disconnected is picked up now
                    while not self.stopping.is_set():
                        for _ in conn.notifies(timeout=0.5, stop_after=1):
                            self.wake.set()
            except psycopg.Error as exc:
                if is_unavailable(exc):
                    DATABASE.failed(exc, what="listener")
                else:
                    logger.warning("listener connection failed: %s", exc)
                self.stopping.wait(1.0)
