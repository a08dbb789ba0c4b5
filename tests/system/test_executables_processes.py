"""Executables on a machine without bubblewrap, with real processes (API, scheduler, worker,
reviewer): the create answer and /health say why executables cannot run, the run waits with that
reason and spends no attempt, and bubblewrap appearing later makes it run in the same worker.

The worker's PATH holds a directory of the test's and no other directory with a `bwrap` in it,
so the test runs the same whether or not bubblewrap is installed here; "installing" it is a
link to the real binary placed in that directory (skipped when there is none)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
import requests

from tasks.models import Attempt, Process, Run
from tasks.worker import sandbox
from tests.conftest import Processes, free_port, process_env, wait_for, wait_for_api
from tests.factories import UserFactory

pytestmark = pytest.mark.processes

MISSING = "bubblewrap (bwrap) is not installed"
REAL_BWRAP = shutil.which("bwrap")
BWRAP_REASON = sandbox._bwrap_variant()[1]


def path_without_bwrap(bin_dir: Path) -> str:
    dirs = [
        d
        for d in os.environ.get("PATH", "").split(os.pathsep)
        if d and not os.path.exists(os.path.join(d, "bwrap"))
    ]
    return os.pathsep.join([str(bin_dir), *dirs])


class Service:
    def __init__(self, processes: Processes, tmp_path: Path) -> None:
        UserFactory(username="exe")
        port = free_port()
        # Runs that wait for a sandbox are due and unstarted: keep the queue check out of it.
        env = process_env(ALLOWED_HOSTS="127.0.0.1", TASKS_START_SLA_SECONDS="600")
        processes.start("runserver", "--noreload", "--nothreading", f"127.0.0.1:{port}", env=env)
        processes.start("runscheduler", env=env)
        processes.start("runreviewer", env=env)
        self.bin_dir = tmp_path / "bin"
        self.bin_dir.mkdir()
        worker_env = env | {
            "PATH": path_without_bwrap(self.bin_dir),
            "SCHEDULER_SANDBOX_ALLOW_RLIMIT_ONLY": "false",
        }
        self.worker = processes.start("runworker", "--concurrency", "2", env=worker_env)
        self.processes = processes
        self.base = wait_for_api(f"http://127.0.0.1:{port}", details=processes.logs)
        token = requests.post(
            f"{self.base}/api/v1/auth/token",
            json={"username": "exe", "password": "password-123"},
            timeout=5,
        )
        self.headers = {"Authorization": f"Bearer {token.json()['access']}"}

    def get(self, path: str) -> requests.Response:
        return requests.get(f"{self.base}{path}", headers=self.headers, timeout=10)

    def worker_row(self) -> Process | None:
        return Process.objects.filter(role="worker", stopped_at=None).first()

    def other_roles_seen(self) -> bool:
        live = Process.objects.filter(stopped_at=None).values_list("role", flat=True)
        return {"scheduler", "reviewer"} <= set(live)

    def executables(self) -> dict:
        return self.get("/health").json()["components"]["executables"]


def without_bubblewrap(service: Service) -> str:
    """Create an executable task with no worker able to run it; returns its run's id."""
    row = wait_for(service.worker_row, timeout=60, details=service.processes.logs)
    assert isinstance(row, Process)
    # /health is judged below: the scheduler and reviewer, started first, may still be booting.
    wait_for(service.other_roles_seen, timeout=60, details=service.processes.logs)
    assert row.sandbox == "" and row.sandbox_error.startswith(MISSING), row.sandbox_error

    created = requests.post(
        f"{service.base}/api/v1/tasks/upload",
        data={"name": "job"},
        files={"file": ("job.sh", b"#!/bin/sh\necho ran attempt $SCHEDULER_ATTEMPT\n")},
        headers=service.headers,
        timeout=10,
    )
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["max_attempts"] == 5
    (warning,) = body["warnings"]
    assert warning.startswith(f"no live worker can run executables: {MISSING}"), warning
    assert "apt-get install bubblewrap" in warning
    run_id = body["runs"][0]["id"]

    health = service.get("/health")
    assert health.status_code == 200, health.text  # degraded, not down
    assert health.json()["status"] == "warning"
    entry = health.json()["components"]["executables"]
    assert (entry["status"], entry["available"]) == ("warning", False)
    assert entry["error"].startswith(f"1 of 1 live workers cannot run executables: {MISSING}")
    assert [(w["name"], w["sandbox"]) for w in entry["workers"]] == [(row.name, None)]

    # It waits with the reason, as a run no worker can hold does; the worker runs other kinds.
    def waiting() -> dict | None:
        shown = service.get(f"/api/v1/runs/{run_id}").json()
        return shown if shown["status"] == "waiting_for_resource" else None

    shown = wait_for(waiting, timeout=30, details=service.processes.logs)
    assert isinstance(shown, dict)
    assert shown["wait_reason"].startswith(f"no live worker can run executables: {MISSING}")
    handler = requests.post(
        f"{service.base}/api/v1/tasks",
        headers=service.headers,
        timeout=10,
        json={"kind": "handler", "payload": {"name": "noop"}},
    )
    assert handler.status_code == 201 and "warnings" not in handler.json()
    handler_run = handler.json()["runs"][0]["id"]
    wait_for(
        lambda: service.get(f"/api/v1/runs/{handler_run}").json()["status"] == "succeeded",
        timeout=30,
        details=service.processes.logs,
    )
    time.sleep(3)  # more than a heartbeat and a few reviewer passes: still nothing spent
    run = Run.objects.get(pk=run_id)
    assert (run.status, run.attempt) == ("waiting_for_resource", 0)
    assert not Attempt.objects.filter(run=run).exists()
    return run_id


def test_without_bubblewrap_executables_wait_and_say_why(processes, tmp_path) -> None:
    without_bubblewrap(Service(processes, tmp_path))


@pytest.mark.skipif(
    REAL_BWRAP is None or bool(BWRAP_REASON),
    reason=f"no working bubblewrap here to link into the worker's PATH: {BWRAP_REASON}",
)
def test_bubblewrap_installed_later_runs_them_without_a_restart(processes, tmp_path) -> None:
    service = Service(processes, tmp_path)
    run_id = without_bubblewrap(service)
    pid = service.worker.pid
    assert REAL_BWRAP is not None
    (service.bin_dir / "bwrap").symlink_to(REAL_BWRAP)  # "apt-get install bubblewrap"

    def finished() -> dict | None:
        shown = service.get(f"/api/v1/runs/{run_id}").json()
        return shown if shown["status"] in ("succeeded", "failed") else None

    shown = wait_for(finished, timeout=30, details=processes.logs)
    assert isinstance(shown, dict)
    assert (shown["status"], shown["attempt"], shown["output"]) == (
        "succeeded",
        1,
        "ran attempt 1\n",
    ), shown
    assert service.worker.poll() is None and service.worker.pid == pid  # the same process
    row = service.worker_row()
    assert row is not None and (row.sandbox, row.sandbox_error) == ("bwrap", "")
    wait_for(lambda: service.executables()["status"] == "ok", timeout=10)
    assert service.get("/health").json()["status"] == "ok"

    # Removed again: the worker notices that too, and /health turns degraded.
    (service.bin_dir / "bwrap").unlink()
    wait_for(
        lambda: service.executables()["status"] == "warning", timeout=15, details=processes.logs
    )
    assert service.worker.poll() is None
