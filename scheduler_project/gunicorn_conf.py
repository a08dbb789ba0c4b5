"""gunicorn settings for the API: `gunicorn -c scheduler_project/gunicorn_conf.py
scheduler_project.wsgi` (the Dockerfile's CMD). Command-line flags override any of them."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from gunicorn.glogging import Logger

from scheduler_project.logging import RedactFilter

bind = os.environ.get("GUNICORN_BIND", "0.0.0.0:8000")
# gthread: one worker process per core plus one, 2 threads each (WEB_CONCURRENCY and
# GUNICORN_THREADS override). Chosen by measurement on 2 cores (`python -m bench api --rate 300`,
# docs/operations.md): threads keep a process busy while PostgreSQL writes a page, and more
# processes with fewer threads queue less behind one another's Python (one GIL per process).
# At 300 reads/s (twice the 150 reads/s peak the API is sized for), 3 x 2 held p95 at
# 11-21 ms in five interleaved runs where 2 x 4 ranged from 10 to 121 ms. Each thread holds
# its own database connection.
# os.sched_getaffinity follows CPU pinning (taskset, cpuset); a container's CPU quota is not
# visible to it, so set WEB_CONCURRENCY under a quota.
# The gthread worker, telling the application how long each request queued for a thread:
# admission control sheds what waited past SCHEDULER_QUEUE_BUDGET_SECONDS (docs/operations.md).
worker_class = "scheduler_project.gunicorn_worker.AdmissionThreadWorker"
workers = int(os.environ.get("WEB_CONCURRENCY") or len(os.sched_getaffinity(0)) + 1)
threads = int(os.environ.get("GUNICORN_THREADS") or 2)
# The bound of each process's queue: connections it holds, kept-alive idle ones included; past
# it, new connections wait in the kernel's listen backlog (their wait counted all the same:
# gunicorn_worker.received_ago).
worker_connections = int(os.environ.get("GUNICORN_WORKER_CONNECTIONS") or 1000)
timeout = 30
graceful_timeout = 20
# Recycles each worker after about 10,000 requests: a slow leak cannot grow without bound.
max_requests = 10000
max_requests_jitter = 1000
accesslog = "-"


class RedactingLogger(Logger):
    """gunicorn's own log lines through the redaction filter every other log has: an access
    line carries the request's query string, and a calendar feed's holds its token
    (`?token=`, tasks/feed_tokens.py)."""

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)  # (re)makes the handlers: on start and on each reload
        for log in (self.access_log, self.error_log):
            for handler in log.handlers:
                handler.addFilter(RedactFilter())


logger_class = RedactingLogger

# Request metrics are counted per worker process; /metrics sums them only in prometheus_client's
# multiprocess mode. Without a directory set (`manage.py runall`, a bare `gunicorn -c` of this
# file) the master makes a private one at start, which its workers inherit, and removes it at exit.
_own_multiproc_dir: list[str] = []


def on_starting(server: Any) -> None:
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        _own_multiproc_dir.append(tempfile.mkdtemp(prefix="scheduler-prometheus-"))
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = _own_multiproc_dir[0]


def post_worker_init(worker: Any) -> None:
    # What a rolling restart waits for (docs/operations.md, "Rolling restarts"): this worker has
    # loaded the application and accepts connections from now on.
    worker.log.info("Worker ready (pid: %s, master: %s)", worker.pid, worker.ppid)


def on_exit(server: Any) -> None:
    for path in _own_multiproc_dir:
        shutil.rmtree(path, ignore_errors=True)
