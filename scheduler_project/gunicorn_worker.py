"""The API's gunicorn worker: gunicorn's threaded worker that tells the application how long each
request waited in the process's queue (`gunicorn_conf.py` names it as `worker_class`).

The gthread worker's main thread accepts connections and hands each ready one to a pool of
`threads` threads through an unbounded queue; nothing in gunicorn says how long a request sat
there. This worker stamps a connection when it enters the queue (accepted, or readable again
when kept alive), back-dated to when the kernel received its last bytes (`received_ago`: the
listen backlog's wait included), and puts the seconds until a thread took it up into the
request's environ as `QUEUE_WAIT_KEY`, which the admission middleware
(scheduler_project/web/admission.py) judges, and the stamp itself (time.monotonic()) as
`QUEUED_AT_KEY`, from which the request's deadline counts (scheduler_project/web/deadline.py).
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from gunicorn.workers.gthread import ThreadWorker

# The environ key. Nothing of the project is imported here: gunicorn's master loads this module
# before its `on_starting` hook sets up the metrics directory that the workers inherit.
QUEUE_WAIT_KEY = "scheduler.queue_wait_seconds"
QUEUED_AT_KEY = "scheduler.queued_at"

# struct tcp_info (linux/tcp.h): 8 one-byte fields, then 32-bit ones; tcpi_last_data_recv, the
# milliseconds since the last data arrived, is the 12th of those.
_TCP_INFO = struct.Struct("8B12I")


def received_ago(sock: socket.socket) -> float:
    """Seconds since the kernel last received data on `sock` (the request's bytes, or the
    handshake when none came yet): the time a new connection spent in the listen backlog before
    this process accepted it, as well as after. 0 where the kernel does not say (not Linux, not
    TCP)."""
    option = getattr(socket, "TCP_INFO", None)
    if option is None:
        return 0.0
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, option, _TCP_INFO.size)
        return _TCP_INFO.unpack_from(info)[-1] / 1000
    except (OSError, struct.error):
        return 0.0


WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class AdmissionThreadWorker(ThreadWorker):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._waited = threading.local()

    def enqueue_req(self, conn: Any) -> None:
        # Counted from the request's arrival, not from the accept: a connection that waited in
        # the listen backlog (no thread free to accept, or no worker at all while gunicorn forks
        # one after a crash) has waited too.
        conn.queued_at = time.monotonic() - received_ago(conn.sock)
        super().enqueue_req(conn)

    def handle(self, conn: Any) -> Any:
        # A new connection's thread may then wait for the request's bytes: the client's time,
        # not the queue's, so it is not counted.
        self._waited.queued_at = conn.queued_at
        self._waited.seconds = time.monotonic() - conn.queued_at
        return super().handle(conn)

    def load_wsgi(self) -> None:
        super().load_wsgi()
        app: WSGIApp = self.wsgi  # type: ignore[has-type]  # set by gunicorn, untyped
        waited = self._waited

        def stamped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
            # Taken once: an HTTP/2 connection serves many streams in one `handle`.
            environ[QUEUE_WAIT_KEY] = getattr(waited, "seconds", None)
            environ[QUEUED_AT_KEY] = getattr(waited, "queued_at", None)
            waited.seconds = waited.queued_at = None
            return app(environ, start_response)

        self.wsgi = stamped
