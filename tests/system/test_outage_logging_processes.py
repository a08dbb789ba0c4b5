"""A PostgreSQL stop under running roles and the API is logged once when it begins and once when
it ends by each process, not once per pass, reconnect or refused request."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import requests

from tests.conftest import ROOT, Processes, free_port, process_env, wait_for, wait_for_api
from tests.system.test_chaos import PrivateCluster, _pg_bin

pytestmark = [
    pytest.mark.processes,
    pytest.mark.skipif(_pg_bin() is None or shutil.which("runuser") is None, reason="needs pg_ctl"),
]

STOP_SECONDS = 8.0
LOUD = re.compile(r"\b(WARNING|ERROR|CRITICAL)\b|Traceback")


def loud_lines(log: Path) -> list[str]:
    return [line for line in log.read_text(errors="replace").splitlines() if LOUD.search(line)]


def test_a_database_stop_is_logged_once_per_process_each_way(tmp_path):
    root = Path(tempfile.mkdtemp(prefix="scheduler-outage-pg-"))
    cluster = PrivateCluster(root)
    cluster.start()
    procs = Processes(tmp_path)
    api: subprocess.Popen | None = None
    try:
        env = process_env(DATABASE_URL=cluster.url, ALLOWED_HOSTS="127.0.0.1")
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "-v", "0"],
            env=env,
            check=True,
            timeout=120,
            cwd=ROOT,
        )
        for role in ("runscheduler", "runreviewer", "runworker", "runnotifier"):
            procs.start(role, env=env)
        port = free_port()
        api_log = tmp_path / "api.log"
        api = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "-c",
                "scheduler_project/gunicorn_conf.py",
                "scheduler_project.wsgi",
                "--workers",
                "1",
                "--bind",
                f"127.0.0.1:{port}",
            ],
            cwd=ROOT,
            env=env,
            stdout=api_log.open("wb"),
            stderr=subprocess.STDOUT,
        )
        base = wait_for_api(f"http://127.0.0.1:{port}", timeout=60)

        def healthy() -> bool:  # every role has registered
            return requests.get(f"{base}/health", timeout=5).status_code == 200

        wait_for(healthy, timeout=60, details=procs.logs)
        time.sleep(2.0)  # every role through a few passes
        logs = [*tmp_path.glob("run*.log"), api_log]
        before = {log: len(loud_lines(log)) for log in logs}

        cluster.pg_ctl("stop")
        refused = 0
        deadline = time.monotonic() + STOP_SECONDS
        while time.monotonic() < deadline:
            # Signing in reads the users table: refused while the database is away.
            sent = {"username": "nobody", "password": "wrong-password"}
            response = requests.post(f"{base}/api/v1/auth/token", json=sent, timeout=10)
            refused += response.status_code == 503
            requests.get(f"{base}/health", timeout=10)  # a probe meanwhile, as a balancer's
            time.sleep(0.1)
        cluster.pg_ctl("start")
        assert refused > 20

        def recovered() -> bool:
            requests.get(f"{base}/health", timeout=10)  # the API's next use of the database
            return all(
                "database available again" in log.read_text(errors="replace") for log in logs
            )

        def told() -> str:
            return "\n".join(f"{log.name}: {loud_lines(log)[before[log] :]}" for log in logs)

        wait_for(recovered, timeout=60, details=told)
        time.sleep(2.0)  # a few more passes: nothing more to say
        for log in logs:
            new = loud_lines(log)[before[log] :]
            # The outage's two lines, and at most a couple more (e.g. a connection that died
            # while a thread held it); before, each pass, retry and request added one or more.
            assert 2 <= len(new) <= 4, (log.name, new)
            assert "Traceback" not in "\n".join(new), (log.name, new)
    finally:
        if api is not None:
            api.terminate()
            api.wait(timeout=20)
        procs.stop_all()
        try:
            cluster.pg_ctl("stop")
        except subprocess.CalledProcessError:
            pass
        shutil.rmtree(root, ignore_errors=True)
