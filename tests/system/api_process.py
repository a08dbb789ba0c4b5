"""The API as the system tests run it: gunicorn with the production config, and the operator's
token with an every-second recurring task that shows holes and doubles in the history."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import requests

from tests.conftest import ROOT, Processes, wait_for_api


def start_gunicorn(procs: Processes, env: dict[str, str], log: Path, port: int) -> tuple:
    """gunicorn (scheduler_project/gunicorn_conf.py, two workers) on 127.0.0.1:`port`, owned by
    `procs`; returns (the master process, its base URL) once it answers."""
    master = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "-c",
            "scheduler_project/gunicorn_conf.py",
            "scheduler_project.wsgi",
            "--workers",
            "2",
            "--bind",
            f"127.0.0.1:{port}",
        ],
        cwd=ROOT,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    procs.started.append(master)
    return master, wait_for_api(f"http://127.0.0.1:{port}", details=procs.logs)


def sign_in_with_every_second_task(base: str, username: str, password: str) -> tuple[str, str]:
    """An access token for `username`, and the id of the every-second `record` task it creates."""
    token = requests.post(
        f"{base}/api/v1/auth/token",
        json={"username": username, "password": password},
        timeout=10,
    ).json()["access"]
    recurring = requests.post(
        f"{base}/api/v1/tasks",
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
        json={
            "name": "every-second",
            "kind": "handler",
            "payload": {"name": "record"},
            "schedule": {"type": "interval", "every": 1},
        },
    ).json()["id"]
    return token, recurring
