"""Django's PostgreSQL backend; a `default` connection on a read-only server counts as unusable.

After a failover the old primary may come back as a standby, or be fenced read-only
(`default_transaction_read_only`), while connections to it stay open: every write on them fails
with "cannot execute ... in a read-only transaction" and Django, whose health check is a
`SELECT 1`, would keep them. Counting them unusable makes Django close them wherever it checks
(CONN_HEALTH_CHECKS at a request's or loop pass's first query, and after any database error),
and the reconnect lets libpq find the writable host (`target_session_attrs=read-write`). Both
values come with every answer from PostgreSQL 14 on (ParameterStatus): no extra round trip.
The `replica` alias is read-only by design and is left alone, but for one change: a `replica`
connection opened on a standby whose server is then promoted (a failover made its standby the
new primary, and `in_hot_standby` turns off in its next answer) counts as unusable too, so the
API's reads go back to a standby at once instead of loading the new primary until CONN_MAX_AGE.
A replica connection that found no standby when it opened (`prefer-standby` fell back to the
primary) is kept: dropping it would reconnect on every request while no standby is up.

Each new connection also prices random reads as SSD and cloud storage have them
(`random_page_cost`, DATABASES' RANDOM_PAGE_COST; 0 leaves the server's): PostgreSQL's default, 4,
prices them as on a spinning disk, and picked a bitmap scan and a sort over a backward index scan
for a task's latest runs (the task list page: 5.2x -> 4.6x the floor in `bench api`;
docs/operations.md, Tuning). Set per session, not per server: it needs no privilege and passes
PgBouncer, which refuses the `options` startup parameter unless told to ignore it. So is
`plan_cache_mode` (DATABASES' PLAN_CACHE_MODE; empty leaves the server's): with `auto`,
PostgreSQL planned most of the API's prepared reads again on every execution, because their
custom plans always looked cheaper than the generic one (`python -m bench plans`). And `jit` is
off on every connection: the JIT compiler ran on each execution of a statement whose estimate
passed `jit_above_cost`, and compiled for longer than the statement ran.

Django's health check is a `SELECT 1` round trip at each request's first query, on top of the
one statement a task read needs. A connection that passed it within the last second and has
received nothing since is taken as usable without one. A server that ends a connection (restart,
failover, `pg_terminate_backend`) sends an error or closes the socket, which makes it readable,
and a readable idle connection gets the full check. A primary fenced by a configuration reload
alone (`default_transaction_read_only`, no restart) reports it only with its next answer, so each
connection also gets the full check once a second: such a fence is found within a second.

A connection never sends PostgreSQL a cancel request (`NeverCancelConnection`). A commit on a
primary with a synchronous standby is durable locally first and then waits for the standby; a
cancel arriving during that wait ends the wait, not the commit: the client is told it succeeded
(`WARNING: canceling wait for synchronous replication`), every session sees the row at once, and
the row is lost when a failover promotes the standby that never got it. psycopg sends a cancel
when KeyboardInterrupt or SystemExit interrupts a query (Ctrl-C; the second stop signal our
daemons take as "exit now"; gunicorn's quit and worker-timeout handlers), and nothing tells it
whether the statement is a commit. Without the cancel it waits up to 5 s for the statement's
answer and then closes the connection; the server-side wait goes on, and the commit becomes
visible only once the standby has it (or the HA engine stops requiring it).
"""

from __future__ import annotations

import logging
import select
import time

import psycopg
from django.db import DEFAULT_DB_ALIAS
from django.db.backends.postgresql import base
from psycopg.pq import TransactionStatus

from scheduler_project.database import PLAN_CACHE_MODES
from scheduler_project.postgresql.hung import order_hosts

HEALTH_CHECK_REUSE_SECONDS = 1.0
logger = logging.getLogger(__name__)


class NeverCancelConnection(psycopg.Connection):
    """A psycopg connection that refuses to cancel its running statement (module docstring)."""

    def cancel(self) -> None:
        logger.warning("not cancelling a running statement: it may be a commit")

    def cancel_safe(self, *, timeout: float = 30.0) -> None:
        self.cancel()


def nothing_arrived(raw: object) -> bool:
    """An open, idle connection with nothing to read: the server has not ended it since its last
    answer (an ending server's error message or close makes the socket readable)."""
    if raw.closed or raw.info.transaction_status != TransactionStatus.IDLE:  # type: ignore[attr-defined]
        return False
    poller = select.poll()
    poller.register(raw.fileno(), select.POLLIN | select.POLLPRI)  # type: ignore[attr-defined]
    return not poller.poll(0)  # POLLERR and POLLHUP are reported whatever the mask


def in_hot_standby(raw: object) -> bool:
    return raw.info.parameter_status("in_hot_standby") == "on"  # type: ignore[attr-defined]


def server_is_read_only(raw: object) -> bool:
    fenced = raw.info.parameter_status("default_transaction_read_only")  # type: ignore[attr-defined]
    return in_hot_standby(raw) or fenced == "on"


class DatabaseWrapper(base.DatabaseWrapper):
    checked_at = float("-inf")  # monotonic time of the last full check this connection passed
    opened_on_standby = False  # this connection's server was a hot standby when it opened

    def get_connection_params(self) -> dict:
        params = super().get_connection_params()
        if self.alias == DEFAULT_DB_ALIAS and "," in str(params.get("host", "")):
            # A host a statement hung on (an orphaned primary) goes last (postgresql/hung.py).
            host, port = order_hosts(str(params["host"]), str(params.get("port") or ""))
            params["host"] = host
            if port:
                params["port"] = port
        return params

    def get_new_connection(self, conn_params: dict) -> psycopg.Connection:
        connection = super().get_new_connection(conn_params)
        # Django builds it with psycopg.connect; the subclass only overrides methods.
        connection.__class__ = NeverCancelConnection
        return connection

    def init_connection_state(self) -> None:
        super().init_connection_state()
        self.checked_at = time.monotonic()  # a new connection has just answered
        self.opened_on_standby = self.connection is not None and in_hot_standby(self.connection)
        # No JIT compilation: every statement of the service is short, and PostgreSQL compiles
        # one whose cost estimate passes jit_above_cost (100,000) on every execution. The API's
        # task list page, a generic plan over an owner's 30,000 tasks, spent 95 of its 141 ms
        # compiling (bench day's profile; bench/NOTEBOOK.md, "A production day: its profile").
        sets = ["SET jit = off"]  # one round trip for all
        cost = float(self.settings_dict.get("RANDOM_PAGE_COST") or 0)
        if cost > 0:
            sets.append(f"SET random_page_cost = {cost}")
        mode = self.settings_dict.get("PLAN_CACHE_MODE") or ""
        if mode in PLAN_CACHE_MODES and mode:  # validated by DATABASES; never text from elsewhere
            sets.append(f"SET plan_cache_mode = {mode}")
        if self.connection is not None:
            with self.connection.cursor() as cursor:
                cursor.execute("; ".join(sets))

    def is_usable(self) -> bool:
        now = time.monotonic()
        if self.connection is None:
            return False
        if now - self.checked_at < HEALTH_CHECK_REUSE_SECONDS and nothing_arrived(self.connection):
            return not self._wrong_server()
        if not super().is_usable() or self._wrong_server():
            return False
        self.checked_at = now
        return True

    def _wrong_server(self) -> bool:
        if self.alias != DEFAULT_DB_ALIAS:
            # The replica's server was promoted under this connection (module docstring).
            return self.opened_on_standby and not in_hot_standby(self.connection)
        return server_is_read_only(self.connection)
