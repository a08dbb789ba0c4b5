"""gunicorn settings for the API: `gunicorn -c scheduler_project/gunicorn_conf.py
scheduler_project.wsgi` (the Dockerfile's CMD). Command-line flags override any of them."""

from __future__ import annotations

import os

bind = os.environ.get("GUNICORN_BIND", "0.0.0.0:8000")
# Sync workers, one per core plus one (WEB_CONCURRENCY overrides). An API request is mostly
# Python on the CPU with short PostgreSQL round trips, so more workers than that only take turns
# on the cores: on 2 cores at 150 reads/s + 5 writes/s, 4 workers answered with p95 34 ms and 3
# workers with p95 26 ms (docs/benchmarks.md). os.sched_getaffinity follows CPU pinning (taskset,
# cpuset); a container's CPU quota is not visible to it, so set WEB_CONCURRENCY under a quota.
workers = int(os.environ.get("WEB_CONCURRENCY") or len(os.sched_getaffinity(0)) + 1)
timeout = 30
graceful_timeout = 20
# Recycles each worker after about 10,000 requests: a slow leak cannot grow without bound.
max_requests = 10000
max_requests_jitter = 1000
accesslog = "-"
