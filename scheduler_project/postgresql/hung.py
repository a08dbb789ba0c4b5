"""Giving up a hung statement without cancelling it, and keeping away from the host it hung on.

After a failover that leaves the old primary running (its HA agent killed, its supervisor slow
to start it again), that server still accepts connections and writes, and every commit on it
waits for a synchronous standby that was promoted meanwhile: forever, or until the orphan is
stopped. A role whose connection stayed there hangs in that commit; its heartbeats stop, and the
reviewer on the new primary would hand its runs to another worker although it is alive and holds
their outcomes.

`abandon_if_hung` bounds a block of statements: past the bound, a watchdog thread shuts the
connection's socket down (`shutdown(2)` on a duplicate of its descriptor). The blocked call
then fails as a lost connection, and the caller's usual path drops the connection and retries
on a new one. No cancel request is sent (a cancelled commit waiting for the standby is reported
committed and may be lost; scheduler_project/postgresql/base.py): the server-side commit goes on
waiting, and becomes visible only if its standby gets it. Retrying is therefore safe only for
writes that are idempotent or fenced, such as the worker's outcome write and heartbeats.

The host the statement hung on is avoided for `AVOID_SECONDS`: new connections list it last,
so libpq (`target_session_attrs=read-write`) reaches the new primary before the orphan, which
reports itself writable too. A host that is the only primary is still reached, only after the
standbys were tried.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import psycopg

logger = logging.getLogger(__name__)

AVOID_SECONDS = 60.0  # long enough for an HA engine to stop or rewind the orphan
WATCHDOG_TICK_SECONDS = 0.1

_avoided: dict[tuple[str, str], float] = {}  # (host, port) -> monotonic time to stop avoiding
_avoided_lock = threading.Lock()


def avoid(host: str, port: str, *, seconds: float = AVOID_SECONDS) -> None:
    with _avoided_lock:
        _avoided[(host, port)] = time.monotonic() + seconds


def avoided() -> set[tuple[str, str]]:
    now = time.monotonic()
    with _avoided_lock:
        for key in [k for k, until in _avoided.items() if until <= now]:
            del _avoided[key]
        return set(_avoided)


def order_hosts(host: str, port: str) -> tuple[str, str]:
    """libpq's comma-separated host and port lists with the avoided hosts moved to the end (the
    order among the others kept). One port for every host stays one port."""
    hosts = host.split(",")
    if len(hosts) < 2:
        return host, port
    ports = port.split(",") if port else [""]
    if len(ports) == 1:
        ports = ports * len(hosts)
    if len(ports) != len(hosts):
        return host, port  # libpq will refuse it; not ours to fix here
    skip = avoided()
    pairs = list(zip(hosts, ports, strict=True))
    ordered = [p for p in pairs if p not in skip] + [p for p in pairs if p in skip]
    new_host = ",".join(h for h, _ in ordered)
    new_port = ",".join(p for _, p in ordered) if port else ""
    return new_host, new_port


@dataclass
class _Guard:
    deadline: float
    seconds: float
    conn: Callable[[], psycopg.Connection | None]
    what: str


class _Watchdog(threading.Thread):
    """Shuts down the sockets of blocks that outlived their bound (one thread per process)."""

    def __init__(self) -> None:
        super().__init__(name="hung-statement-watchdog", daemon=True)
        self.lock = threading.Lock()
        self.guards: dict[int, _Guard] = {}
        self.ids = itertools.count()

    def add(self, guard: _Guard) -> int:
        with self.lock:
            key = next(self.ids)
            self.guards[key] = guard
        return key

    def remove(self, key: int) -> None:
        with self.lock:
            self.guards.pop(key, None)

    def run(self) -> None:
        while True:
            time.sleep(WATCHDOG_TICK_SECONDS)
            now = time.monotonic()
            # Under the lock: a guard still listed means its block has not ended, so the
            # connection is the one it hung on and has not been closed (or its descriptor
            # reused) by its thread.
            with self.lock:
                for key in [k for k, g in self.guards.items() if g.deadline <= now]:
                    self._abandon(self.guards.pop(key))

    def _abandon(self, guard: _Guard) -> None:
        conn = guard.conn()
        if conn is None or conn.closed:
            return
        try:
            host, port = conn.info.host, str(conn.info.port)
            fd = os.dup(conn.fileno())
        except (psycopg.Error, OSError) as exc:
            logger.warning("could not abandon a hung %s: %s", guard.what, exc)
            return
        avoid(host, port)
        sock = socket.socket(fileno=fd)
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # already closed by the server
        finally:
            sock.close()  # the duplicate only
        logger.warning(
            "%s hung for %.1f s on %s:%s: connection abandoned without cancelling it; "
            "new connections try that host last for %.0f s",
            guard.what,
            guard.seconds,
            host,
            port,
            AVOID_SECONDS,
            extra={"event": "statement_abandoned", "host": f"{host}:{port}"},
        )


_watchdog: _Watchdog | None = None
_start_lock = threading.Lock()


def _running_watchdog() -> _Watchdog:
    global _watchdog
    with _start_lock:
        if _watchdog is None or not _watchdog.is_alive():
            _watchdog = _Watchdog()
            _watchdog.start()
        return _watchdog


@contextlib.contextmanager
def abandon_if_hung(
    conn: Callable[[], psycopg.Connection | None], seconds: float, *, what: str = "statement"
) -> Iterator[None]:
    """Bound the block's statements on the connection `conn()` returns (read when the bound
    is passed: the block may connect) to `seconds`; past it the block's database call fails
    as a lost connection (module docstring). 0 or less: no bound."""
    if seconds <= 0:
        yield
        return
    watchdog = _running_watchdog()
    key = watchdog.add(_Guard(time.monotonic() + seconds, seconds, conn, what))
    try:
        yield
    finally:
        watchdog.remove(key)
