"""Fixtures for the operations tests: a real gunicorn serving the test database."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest
import requests

from tests.conftest import ROOT, process_env, wait_for


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def gunicorn(transactional_db, tmp_path) -> Iterator[Callable[..., str]]:
    """`gunicorn(workers=N, **env)` starts the API and returns its base URL; stopped at teardown."""
    started: list[subprocess.Popen] = []

    def start(*, workers: int = 2, **extra: str) -> str:
        port = free_port()
        log = (tmp_path / f"gunicorn-{port}.log").open("wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "scheduler_project.wsgi", "--workers", str(workers),
             "--bind", f"127.0.0.1:{port}", "--timeout", "30"],
            cwd=ROOT, env=process_env(ALLOWED_HOSTS="127.0.0.1", **extra), stdout=log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        started.append(proc)
        base = f"http://127.0.0.1:{port}"

        def up() -> bool:
            try:
                return requests.get(f"{base}/health/live", timeout=5).status_code == 200
            except requests.RequestException:  # not listening yet, or still booting
                return False

        wait_for(up, timeout=30, interval=0.2)
        return base

    yield start
    for proc in started:
        proc.terminate()
    for proc in started:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
