"""The `gunicorn` fixture: a real gunicorn serving the test database."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence

import pytest

from tests.conftest import ROOT, free_port, process_env, wait_for_api


@pytest.fixture
def gunicorn(transactional_db, tmp_path) -> Iterator[Callable[..., str]]:
    """`gunicorn(workers=N, args=[...], **env)` starts the API and returns its base URL (`args`:
    more command-line options, e.g. `-c scheduler_project/gunicorn_conf.py`); stopped at
    teardown."""
    started: list[subprocess.Popen] = []

    def start(*, workers: int = 2, args: Sequence[str] = (), **extra: str) -> str:
        port = free_port()
        log = (tmp_path / f"gunicorn-{port}.log").open("wb")
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "scheduler_project.wsgi",
                "--workers",
                str(workers),
                "--bind",
                f"127.0.0.1:{port}",
                "--timeout",
                "30",
                *args,
            ],
            cwd=ROOT,
            env=process_env(ALLOWED_HOSTS="127.0.0.1", **extra),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        started.append(proc)
        return wait_for_api(f"http://127.0.0.1:{port}", timeout=30)

    yield start
    for proc in started:
        proc.terminate()
    for proc in started:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
