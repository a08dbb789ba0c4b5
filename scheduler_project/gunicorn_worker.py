"""The API's gunicorn worker: gunicorn's threaded worker that tells the application how long each
request waited in the process's queue (`gunicorn_conf.py` names it as `worker_class`).

The gthread worker's main thread accepts connections and hands each ready one to a pool of
`threads` threads through an unbounded queue; nothing in gunicorn says how long a request sat
there. This worker stamps a connection when it enters the queue (accepted, or readable again
when kept alive) and puts the seconds until a thread took it up into the request's environ as
`QUEUE_WAIT_KEY`, which the admission middleware (scheduler_project/web/admission.py) judges,
and the stamp itself (time.monotonic()) as `QUEUED_AT_KEY`, from which the request's deadline
counts (scheduler_project/web/deadline.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from gunicorn.workers.gthread import ThreadWorker

# The environ key. Nothing of the project is imported here: gunicorn's master loads this module
# before its `on_starting` hook sets up the metrics directory that the workers inherit.
QUEUE_WAIT_KEY = "scheduler.queue_wait_seconds"
QUEUED_AT_KEY = "scheduler.queued_at"

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class AdmissionThreadWorker(ThreadWorker):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._waited = threading.local()

    def enqueue_req(self, conn: Any) -> None:
        conn.queued_at = time.monotonic()
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
