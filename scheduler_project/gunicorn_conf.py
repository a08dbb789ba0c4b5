"""gunicorn settings for the API: `gunicorn -c scheduler_project/gunicorn_conf.py
scheduler_project.wsgi` (the Dockerfile's CMD). Command-line flags override any of them."""

from __future__ import annotations

import os

bind = os.environ.get("GUNICORN_BIND", "0.0.0.0:8000")
# gthread: one worker process per core, 4 threads each (WEB_CONCURRENCY and GUNICORN_THREADS
# override). Chosen by measurement on 2 cores (`python -m bench api`, docs/operations.md): a
# task list page spends most of its time waiting for PostgreSQL, and threads keep a process busy
# meanwhile. At 150 reads/s + 5 creates/s with other load on the machine, 2 x 4 threads kept up
# (p50 10-13 ms) where 3 sync workers fell behind in two runs of three. Each thread holds its
# own database connection. os.sched_getaffinity follows CPU pinning (taskset, cpuset); a
# container's CPU quota is not visible to it, so set WEB_CONCURRENCY under a quota.
worker_class = "gthread"
workers = int(os.environ.get("WEB_CONCURRENCY") or len(os.sched_getaffinity(0)))
threads = int(os.environ.get("GUNICORN_THREADS") or 4)
timeout = 30
graceful_timeout = 20
# Recycles each worker after about 10,000 requests: a slow leak cannot grow without bound.
max_requests = 10000
max_requests_jitter = 1000
accesslog = "-"
