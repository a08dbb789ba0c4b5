"""`manage.py runall` as `make run` starts it: /metrics counts the requests of every API worker,
and after Ctrl-C (or the death of what started it) no process is left: no role, no gunicorn
worker, no embedded PostgreSQL."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from tests.conftest import ROOT, free_port, process_env, wait_for, wait_for_api
from tests.factories import UserFactory
from tests.scheduler_project.web.test_metrics import value

MANAGE = str(ROOT / "manage.py")
PASSWORD = "password-123"  # tests.factories.UserFactory's


def parents() -> dict[int, int]:
    """pid -> parent pid of every process on the machine, from /proc."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:  # exited meanwhile
                continue
            found[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return found


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for child, parent in parents().items():
        children.setdefault(parent, []).append(child)
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pid: int) -> bool:
    """Running, not a zombie waiting to be reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def token(base: str, username: str, password: str) -> str:
    body = {"username": username, "password": password}
    response = requests.post(f"{base}/api/v1/auth/token", json=body, timeout=10)
    assert response.status_code == 200, response.text
    return response.json()["access"]


def create_task(base: str, access: str, delay: int) -> dict:
    body = {
        "name": "t",
        "kind": "handler",
        "payload": {"name": "echo", "args": {}},
        "schedule": {"type": "once", "delay": delay},
    }
    headers = {"Authorization": f"Bearer {access}"}
    response = requests.post(f"{base}/api/v1/tasks", json=body, headers=headers, timeout=30)
    assert response.status_code == 201, response.text
    return response.json()


class Runall:
    """`manage.py runall` on its own port; whatever it leaves is killed at teardown."""

    def __init__(self, tmp_path: Path, env: dict[str, str]) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = tmp_path / "runall.log"
        self.env = env
        self.proc: subprocess.Popen | None = None
        self.seen: set[int] = set()

    def start(self, *wrapper: str) -> subprocess.Popen:
        cmd = [sys.executable, MANAGE, "runall", "--bind", f"127.0.0.1:{self.port}"]
        cmd += ["--api-workers", "3", "--concurrency", "2"]
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                [*wrapper, *cmd], cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT
            )
        wait_for_api(self.base, timeout=90, details=self.log)
        return self.proc

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def remember(self, *pids: int) -> set[int]:
        """Every process of the group now: `pids` and their descendants."""
        for pid in pids:
            self.seen |= {pid} | descendants(pid)
        return set(self.seen)

    def stop(self) -> None:
        """SIGINT (what a test has not stopped yet), then SIGKILL to whatever is left."""
        if self.proc is not None and self.proc.poll() is None:
            self.remember(self.proc.pid)
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for pid in self.seen:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def runall(tmp_path) -> Iterator[Callable[[dict[str, str]], Runall]]:
    started: list[Runall] = []

    def make(env: dict[str, str]) -> Runall:
        started.append(Runall(tmp_path, env))
        return started[-1]

    yield make
    for each in started:
        each.stop()


@pytest.fixture
def embedded_data_dir() -> Iterator[Path]:
    """A data folder outside pytest's base temp, which concurrent pytest sessions keep at mode
    0700: as root, the embedded server runs as its own system user and must reach the folder."""
    path = Path(tempfile.mkdtemp(prefix="scheduler-embedded-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.processes
def test_metrics_count_the_requests_of_every_api_worker(runall, transactional_db) -> None:
    user = UserFactory()
    # Counting, not shedding: on a loaded machine 8 requests at once may wait past the 1 s
    # budget or the 1.5 s deadline, and a shed create is not counted as a 201.
    env = process_env(
        ALLOWED_HOSTS="127.0.0.1",
        SCHEDULER_QUEUE_BUDGET_SECONDS="30",
        SCHEDULER_REQUEST_DEADLINE_SECONDS="0",
    )
    group = runall(env)
    group.start()
    access = token(group.base, user.username, PASSWORD)

    with ThreadPoolExecutor(max_workers=8) as pool:  # concurrent: every worker answers some
        list(pool.map(lambda _: create_task(group.base, access, 3600), range(24)))

    labels = {"route": "api/v1/tasks", "method": "POST", "status": "201"}

    def created() -> float | None:
        text = requests.get(f"{group.base}/metrics", timeout=10).text
        return value(text, "scheduler_api_requests_total", **labels)

    # Each scrape is answered by one worker, whichever: each must see all of them.
    assert [created() for _ in range(6)] == [24.0] * 6


@pytest.mark.processes
def test_ctrl_c_on_the_embedded_database_leaves_no_process(runall, embedded_data_dir) -> None:
    data = embedded_data_dir
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "SECRET_KEY")}
    env.update(SCHEDULER_DATA_DIR=str(data), PYTHONUNBUFFERED="1")
    env.update(DJANGO_SUPERUSER_USERNAME="newcomer", DJANGO_SUPERUSER_PASSWORD=PASSWORD)
    for step in (["migrate", "--no-input"], ["ensureadmin"]):
        command = [sys.executable, MANAGE, *step]
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
    pid_file = data / "pgdata" / "postmaster.pid"
    assert not pid_file.exists()  # each command stopped the server it started when it exited
    group = runall(env)
    proc = group.start()
    access = token(group.base, "newcomer", PASSWORD)
    task = create_task(group.base, access, 0)
    headers = {"Authorization": f"Bearer {access}"}

    def succeeded() -> bool:
        url = f"{group.base}/api/v1/tasks/{task['id']}/runs"
        runs = requests.get(url, headers=headers, timeout=10).json()["results"]
        return any(run["status"] == "succeeded" for run in runs)

    wait_for(succeeded, timeout=60, interval=0.5, details=group.log)
    postmaster = int(pid_file.read_text().split()[0])
    group_pids = group.remember(proc.pid, postmaster)
    assert len(group_pids) > 6  # runall, gunicorn and its workers, 3 roles, the server's

    proc.send_signal(signal.SIGINT)  # what Ctrl-C sends (runall's roles have their own session)
    assert proc.wait(timeout=90) == 0, group.log()

    wait_for(lambda: not [p for p in group_pids if alive(p)], timeout=15, details=group.log)
    assert not pid_file.exists()
    log = group.log()
    assert "all roles stopped" in log
    # The worker ran a payload, then stopped idle: no payload thread was left behind.
    assert "payload thread(s) still running" not in log


@pytest.mark.processes
def test_runall_stops_everything_when_what_started_it_dies(
    runall, transactional_db, tmp_path
) -> None:
    pid_file = tmp_path / "runall.pid"
    group = runall(process_env(ALLOWED_HOSTS="127.0.0.1", RUNALL_PID_FILE=str(pid_file)))
    # A shell in between, as `make run` is: it writes runall's pid, then waits for it.
    shell = group.start("sh", "-c", '"$@" & echo $! > "$RUNALL_PID_FILE"; wait', "sh")
    runall_pid = int(pid_file.read_text())
    group_pids = group.remember(runall_pid)
    assert runall_pid in group_pids and len(group_pids) > 4

    shell.kill()  # SIGKILL: nothing is forwarded to runall
    shell.wait()

    wait_for(lambda: not [p for p in group_pids if alive(p)], timeout=90, details=group.log)
    assert "parent process" in group.log()
