"""API request count and latency by route, correct across every gunicorn worker process.

These are the only metrics kept in process memory (everything else in /metrics is read from
PostgreSQL at scrape time). With `PROMETHEUS_MULTIPROC_DIR` set, prometheus_client writes them to
per-process files in that directory and /metrics sums the files of every worker, dead ones
included, so totals survive worker restarts. Without it (one process, tests) they live in
`REGISTRY` below.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from prometheus_client import CollectorRegistry, Counter, Histogram

MULTIPROC_DIR = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")
if MULTIPROC_DIR:
    os.makedirs(MULTIPROC_DIR, exist_ok=True)

# In multiprocess mode values go to files whatever the registry; this one serves single-process.
REGISTRY = CollectorRegistry(auto_describe=True)

REQUESTS = Counter(
    "scheduler_api_requests",
    "API requests answered, by route pattern, method and status code.",
    ["route", "method", "status"],
    registry=REGISTRY,
)
LATENCY = Histogram(
    "scheduler_api_request_duration_seconds",
    "Time to answer an API request, by route pattern and method.",
    ["route", "method"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
    registry=REGISTRY,
)

_METHODS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}


def route_of(request: HttpRequest) -> str:
    """The URL pattern that served the request (`api/v1/tasks/<uuid:pk>`), never the raw path:
    ids in paths would give every task its own time series."""
    match = getattr(request, "resolver_match", None)
    if match is None:
        return "unmatched"  # 404s, static files served by whitenoise
    return match.route or match.view_name or "unmatched"


class RequestMetricsMiddleware:
    """Counts and times every request; first in MIDDLEWARE so the timing covers the others."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        start = time.perf_counter()
        response = self.get_response(request)
        elapsed = time.perf_counter() - start
        route = route_of(request)
        # Client-chosen methods must not create unbounded label values.
        method = request.method if request.method in _METHODS else "other"
        REQUESTS.labels(route, method, str(response.status_code)).inc()
        LATENCY.labels(route, method).observe(elapsed)
        return response
