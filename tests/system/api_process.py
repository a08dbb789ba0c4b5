"""The API as the system tests run it: gunicorn with the production config, and the operator's
token with an every-second recurring task that shows holes and doubles in the history."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import requests

from tests.conftest import ROOT, Processes, wait_for_api


def start_gunicorn(
    procs: Processes, env: dict[str, str], log: Path, port: int, *, pidfile: Path | None = None
) -> tuple:
    """gunicorn (scheduler_project/gunicorn_conf.py, two workers) on 127.0.0.1:`port`, owned by
    `procs`; returns (the master process, its base URL) once it answers. With `pidfile`, the
    master writes its pid there (and a master started by SIGUSR2 to `pidfile`.2)."""
    master = subprocess.Popen(
        [
            # The `gunicorn` command, as the image runs it: the master SIGUSR2 starts runs the
            # same command line again, and `python -m gunicorn` run that way puts gunicorn's
            # package folder first on sys.path, where its `http` hides the standard library's.
            str(Path(sys.executable).with_name("gunicorn")),
            "-c",
            "scheduler_project/gunicorn_conf.py",
            "scheduler_project.wsgi",
            "--workers",
            "2",
            "--bind",
            f"127.0.0.1:{port}",
            *(["--pid", str(pidfile)] if pidfile else []),
        ],
        cwd=ROOT,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    procs.started.append(master)
    return master, wait_for_api(f"http://127.0.0.1:{port}", details=procs.logs)


def ready_workers(log: Path, master: int) -> set[int]:
    """The workers of gunicorn master `master` that logged they accept connections."""
    text = log.read_text(errors="replace")
    found = re.findall(r"Worker ready \(pid: (\d+), master: (\d+)\)", text)
    return {int(worker) for worker, of in found if int(of) == master}


def pid_in(pidfile: Path) -> int | None:
    """The pid a gunicorn pidfile holds, or None while there is none (or it is being written)."""
    try:
        return int(pidfile.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


class Adopted:
    """A process known only by its pid, stopped like a Popen by `Processes.stop_all`: the master
    gunicorn starts on SIGUSR2 is the old master's child, and outlives it."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def poll(self) -> int | None:
        try:
            state = Path(f"/proc/{self.pid}/stat").read_text().rpartition(")")[2].split()[0]
        except FileNotFoundError:
            return 0
        return 0 if state in {"Z", "X"} else None  # a zombie has exited; its parent reaps it

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def wait(self, timeout: float | None = None) -> int:
        deadline = time.monotonic() + (timeout if timeout is not None else 3600)
        while self.poll() is None:
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0)
            time.sleep(0.1)
        return 0


def sign_in_with_every_second_task(base: str, username: str, password: str) -> tuple[str, str]:
    """An access token for `username`, and the id of the every-second `record` task it creates."""
    token = requests.post(
        f"{base}/api/v1/auth/token",
        json={"username": username, "password": password},
        timeout=30,
    ).json()["access"]
    recurring = requests.post(
        f"{base}/api/v1/tasks",
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
        json={
            "name": "every-second",
            "kind": "handler",
            "payload": {"name": "record"},
            "schedule": {"type": "interval", "every": 1, "allow_every_second": True},
        },
    ).json()["id"]
    return token, recurring
