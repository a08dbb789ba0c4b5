"""gunicorn started exactly as the Dockerfile runs it (bound to 127.0.0.1), and data to serve.

Used by `bench api` (latency under load) and `bench soak` (the API's memory over a big history).
"""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import UUID

from rest_framework_simplejwt.tokens import RefreshToken

from bench import data, proc
from scheduler_project import gunicorn_conf

ROOT = Path(__file__).resolve().parents[1]
# The Dockerfile's CMD, but for the address (127.0.0.1 on a free port) and, when asked, the
# worker count.
CONFIG = "scheduler_project/gunicorn_conf.py"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Gunicorn:
    database_url: str
    workers: int | None  # None: gunicorn_conf.py's
    log_dir: str
    threads: int | None = None  # per worker: 1 runs sync workers; None: gunicorn_conf.py's
    port: int = 0
    process: subprocess.Popen | None = None
    env: dict[str, str] = field(default_factory=dict)

    def start(self) -> None:
        self.port = free_port()
        env = dict(os.environ)
        env.update(
            DATABASE_URL=self.database_url,
            # The product's settings and URLs, plus the floor endpoint (bench/floor.py).
            DJANGO_SETTINGS_MODULE="bench.floor_settings",
            SCHEDULER_HANDLER_MODULES="bench.handlers",
            BENCH_RUN_DIR=self.log_dir,
            PYTHONUNBUFFERED="1",
            PYTHONDONTWRITEBYTECODE="1",
            **self.env,
        )
        gunicorn = str(Path(sys.executable).with_name("gunicorn"))
        command = [
            gunicorn,
            "-c",
            CONFIG,
            "scheduler_project.wsgi",
            "--bind",
            f"127.0.0.1:{self.port}",
        ]
        if self.workers:
            command += ["--workers", str(self.workers)]
        else:
            self.workers = gunicorn_conf.workers
        if self.threads == 1:
            command += ["--worker-class", "sync"]
        elif self.threads:
            worker_class = gunicorn_conf.worker_class
            command += ["--worker-class", worker_class, "--threads", str(self.threads)]
        else:
            self.threads = gunicorn_conf.threads
        self.process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdout=open(os.path.join(self.log_dir, "access.log"), "ab"),
            stderr=open(os.path.join(self.log_dir, "gunicorn.log"), "ab"),
        )
        self._wait_ready()

    def _wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"gunicorn exited; see {self.log_dir}/gunicorn.log")
            try:
                if get(self.port, "/health/live", token=None)[0] == 200:
                    if len(self.worker_pids()) >= self.workers:
                        # Warm every worker (imports, connection) before anything is measured.
                        for _ in range(self.workers * 4):
                            get(self.port, "/health/live", token=None)
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError("gunicorn did not become ready")

    def worker_pids(self) -> list[int]:
        return proc.children(self.process.pid) if self.process else []

    def rss(self) -> dict[int, float | None]:
        return {pid: proc.rss_mb(pid) for pid in self.worker_pids()}

    def cpu_seconds(self) -> float:
        pids = [self.process.pid, *self.worker_pids()] if self.process else []
        return sum(proc.cpu_seconds(pid) for pid in pids)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def get(port: int, path: str, *, token: str | None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def token_for(username: str) -> str:
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.get(username=username)
    return str(RefreshToken.for_user(user).access_token)


@dataclass(frozen=True)
class Seeded:
    owner: int
    task_ids: list[UUID]
    run_ids: list[UUID]
    seconds: float


def seed(*, username: str, tasks: int, runs_per_task: int, teams: int = 0) -> Seeded:
    """`tasks` active hourly tasks of a fresh user, each with `runs_per_task` finished runs;
    with `teams`, every second task (and its runs) is a colleague's in one of that many teams
    the user is an editor of, so the user reads it through the team."""
    started = time.monotonic()
    owner = data.owner_id(username)
    task_ids = data.insert_tasks(
        owner,
        tasks,
        raw_schedule={"type": "interval", "every": 3600, "start_at": "2025-01-01T00:00:00Z"},
        next_unplanned_at=datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
        + timedelta(hours=1),
        runs_planned=runs_per_task,
    )
    data.insert_history(owner, tasks * runs_per_task, span=timedelta(hours=runs_per_task))
    run_ids = data.sample_ids("tasks_run", owner, 5000)  # before any moves to a colleague
    if teams:
        data.share_with_teams(owner, data.owner_id(f"{username}-colleague"), teams)
    data.vacuum_analyze()
    return Seeded(owner, task_ids, run_ids, round(time.monotonic() - started, 2))
