"""Admission control: under overload the API answers late requests 503 at once instead of
serving them after their client has given up (docs/operations.md, "Admission control").

Each gunicorn worker process queues the requests its threads have not taken up yet; the worker
(scheduler_project/gunicorn_worker.py) says how long each one waited there. A request that
waited longer than `SCHEDULER_QUEUE_BUDGET_SECONDS` is answered 503 with Retry-After without
touching the database, and one whose client has already closed its connection is not served at
all: both would only be work done for nobody while the queue behind them grows (the goodput
collapse that Netflix's concurrency-limits and Envoy's adaptive concurrency guard against, done
here the simple way: by the age of a request, CoDel's signal). /health and /metrics are never
shed, so a probe or a scrape still sees an overloaded server. Shed requests are counted in
/metrics by reason, and not logged one by one (gunicorn's access log has each). An admitted
request whose first database statement would start past its deadline is answered the same 503
(scheduler_project/web/deadline.py).

Under any other server (runserver, tests, gunicorn's sync worker) no wait is known, and nothing
is shed for waiting.
"""

from __future__ import annotations

import math
import select
import socket
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from prometheus_client import Counter

from scheduler_project.gunicorn_worker import QUEUE_WAIT_KEY, QUEUED_AT_KEY
from scheduler_project.web import request_metrics
from scheduler_project.web.deadline import Deadline, DeadlineExceeded, enforced
from scheduler_project.web.errors import unlogged

# Answered whatever the queue: a liveness or readiness probe and a scrape must see this server.
NEVER_SHED = ("/health", "/metrics")

SHED = Counter(
    "scheduler_api_shed_requests",
    "API requests not served by admission control: waited past the queue budget or reached "
    "their deadline before their first database statement (answered 503), or their client had "
    "gone.",
    ["reason"],
    registry=request_metrics.REGISTRY,
)
REASONS = ("queue_wait", "deadline", "client_gone")
for _reason in REASONS:
    SHED.labels(_reason)  # exported at 0 from the start: a rate of a missing series is no rate

# The peer closed its end (or reset it); a request still unread in the buffer does not hide it.
# A client that only shut down its sending side and still waits for the answer looks gone too:
# HTTP/1.1 clients and proxies do not do that.
_GONE = select.POLLHUP | select.POLLERR | select.POLLRDHUP | select.POLLNVAL


def never_shed(path: str) -> bool:
    return any(path == prefix or path.startswith(prefix + "/") for prefix in NEVER_SHED)


def client_gone(sock: socket.socket | None) -> bool:
    """Whether the client closed its connection; False when no socket is known."""
    if sock is None:
        return False
    poller = select.poll()
    try:
        poller.register(sock, _GONE)
        return any(events & _GONE for _, events in poller.poll(0))
    except (OSError, ValueError):
        return True  # the socket is already closed


def overloaded(budget: float, why: str | None = None) -> JsonResponse:
    why = why or f"this request waited longer than {budget:g} s to be taken up"
    response = JsonResponse(
        {
            "detail": f"The server is overloaded: {why}. Retry after the Retry-After seconds.",
            "code": "overloaded",
        },
        status=503,
    )
    response["Retry-After"] = str(max(1, math.ceil(budget)))
    return response


class AdmissionMiddleware:
    """First in MIDDLEWARE: a shed request costs no other middleware, view or query."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if never_shed(request.path_info):
            return self.get_response(request)
        if client_gone(request.META.get("gunicorn.socket")):
            SHED.labels("client_gone").inc()
            # Nobody reads this; gunicorn's write fails quietly and closes the connection.
            return unlogged(HttpResponse(status=499))
        waited = request.META.get(QUEUE_WAIT_KEY)
        budget = settings.SCHEDULER_QUEUE_BUDGET_SECONDS
        if waited is not None and budget > 0 and waited > budget:
            SHED.labels("queue_wait").inc()
            return unlogged(overloaded(budget))
        queued_at = request.META.get(QUEUED_AT_KEY)
        seconds = settings.SCHEDULER_REQUEST_DEADLINE_SECONDS
        if queued_at is None or seconds <= 0:
            return self.get_response(request)
        with enforced(Deadline(queued_at + seconds)) as deadline:
            response = self.get_response(request)
        if deadline.exceeded and response.status_code == 500:
            # Raised in a middleware, not the view: Django made it a 500 already.
            return self.process_exception(request, DeadlineExceeded()) or response
        return response

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        """A view that reached the request's deadline is answered 503, not 500."""
        if not isinstance(exc, DeadlineExceeded):
            return None
        SHED.labels("deadline").inc()
        budget = settings.SCHEDULER_QUEUE_BUDGET_SECONDS
        seconds = settings.SCHEDULER_REQUEST_DEADLINE_SECONDS
        why = f"this request could not be answered within {seconds:g} s"
        return unlogged(overloaded(budget, why))
