"""Pieces of `python -m bench notify`: a local webhook receiver, role processes, percentiles."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection

from notifications.transports.webhook import verify_signature
from scheduler_project.database import database_url


class Receiver:
    """A webhook receiver on 127.0.0.1 recording when each delivery arrived (time.time())."""

    def __init__(self, secret: str) -> None:
        self.arrivals: dict[str, list[float]] = {}
        self.unverified = 0
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                arrived = time.time()
                body = self.rfile.read(int(self.headers["Content-Length"]))
                ok = verify_signature(
                    secret,
                    self.headers.get("X-Scheduler-Timestamp", ""),
                    body,
                    self.headers.get("X-Scheduler-Signature", ""),
                )
                with receiver.lock:
                    delivery = self.headers.get("X-Scheduler-Delivery", "")
                    receiver.arrivals.setdefault(delivery, []).append(arrived)
                    receiver.unverified += 0 if ok else 1
                self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def count(self) -> int:
        with self.lock:
            return len(self.arrivals)


class Roles:
    """Role processes (`manage.py <command>`); all stopped by `stop_all`, SIGKILL as a last
    resort, so a benchmark never leaves processes behind."""

    def __init__(self, logdir: Path) -> None:
        self.logdir = logdir
        self.procs: list[subprocess.Popen] = []
        self.env = dict(os.environ)
        self.env.update(
            DATABASE_URL=database_url(connection.settings_dict),
            SECRET_KEY=settings.SECRET_KEY,
            SCHEDULER_ENCRYPTION_KEY=settings.SCHEDULER_ENCRYPTION_KEY,
            SCHEDULER_OUTBOUND_ALLOW="127.0.0.1",
            NOTIFICATIONS_DELIVER_IN_WORKER="true",
            PYTHONUNBUFFERED="1",
        )

    def start(self, *args: str) -> subprocess.Popen:
        log = (self.logdir / f"{args[0]}-{len(self.procs)}.log").open("wb")
        manage = Path(settings.BASE_DIR) / "manage.py"
        proc = subprocess.Popen(
            [sys.executable, str(manage), *args],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.procs.append(proc)
        return proc

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 30
        for proc in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile of `values` (sorted or not); NaN for none."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]
