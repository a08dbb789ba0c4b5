"""Shared fixtures: API clients with tokens, and real role processes on the test database."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests
from django.db import connection
from rest_framework.test import APIClient
from rest_framework_simplejwt.tokens import RefreshToken

from scheduler_project.database import database_url as scheduler_database_url
from tests.factories import UserFactory

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def user(db):
    return UserFactory()


@pytest.fixture
def other_user(db):
    return UserFactory()


def client_for(user) -> APIClient:
    client = APIClient()
    token = RefreshToken.for_user(user).access_token
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


@pytest.fixture
def api(user) -> APIClient:
    return client_for(user)


@pytest.fixture
def other_api(other_user) -> APIClient:
    return client_for(other_user)


@pytest.fixture
def anon() -> APIClient:
    return APIClient()


def database_url() -> str:
    """A URL for the database the tests use (the test database, once pytest-django made it)."""
    return scheduler_database_url(connection.settings_dict)


def process_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=database_url(),
        SECRET_KEY="test-secret-key-for-role-processes-0123456789",
        SCHEDULER_TESTING="true",
        PYTHONUNBUFFERED="1",
        LOG_LEVEL="INFO",
    )
    env.update(extra)
    return env


class Processes:
    """Starts `manage.py` role processes; stops them all (SIGTERM, then SIGKILL) at teardown."""

    def __init__(self, logdir: Path) -> None:
        self.logdir = logdir
        self.started: list[subprocess.Popen] = []

    def start(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        log = (self.logdir / f"{args[0]}-{len(self.started)}.log").open("wb")
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "manage.py"), *args],
            cwd=ROOT,
            env=env or process_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.started.append(proc)
        return proc

    def stop_all(self) -> None:
        for proc in self.started:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.started:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace")[-3000:] for p in self.logdir.glob("*.log"))


@pytest.fixture
def processes(transactional_db, tmp_path) -> Iterator[Processes]:
    procs = Processes(tmp_path)
    yield procs
    procs.stop_all()


def wait_for(
    predicate: Callable[[], object],
    *,
    timeout: float,
    interval: float = 0.1,
    details: Callable[[], str] | None = None,
) -> object:
    """Poll `predicate` until it returns something truthy; fail the test after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            extra = f"\n{details()}" if details else ""
            raise AssertionError(f"condition not met within {timeout}s{extra}")
        time.sleep(interval)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now, for a server a test starts."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_api(
    base: str, *, timeout: float = 60, details: Callable[[], str] | None = None
) -> str:
    """Wait until the API at `base` answers /health/live; returns `base`."""

    def up() -> bool:
        try:
            return requests.get(f"{base}/health/live", timeout=5).status_code == 200
        except requests.RequestException:  # not listening yet, or still booting
            return False

    wait_for(up, timeout=timeout, interval=0.2, details=details)
    return base
