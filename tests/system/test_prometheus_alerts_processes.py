"""A real Prometheus (Debian's) scrapes a stack the test starts, with deploy/prometheus/alerts.yml
(docs/operations.md's alerts) loaded: a worker SIGKILLed mid-run, its run rescued once, and
"Workers dying" fires on that first rescue."""

from __future__ import annotations

import shutil
import signal
import subprocess
from pathlib import Path

import pytest
import requests
import yaml

from tasks.models import Attempt, Run
from tests.conftest import ROOT, Processes, free_port, process_env, wait_for
from tests.factories import RunFactory, TaskFactory
from tests.gunicorn_server import gunicorn  # noqa: F401  (a fixture, used by name)

pytestmark = [
    pytest.mark.processes,
    pytest.mark.skipif(shutil.which("prometheus") is None, reason="prometheus is not installed"),
]

TIMING = {
    "TASKS_HEARTBEAT_SECONDS": "0.5",
    "REVIEWERS_RESCUE_AFTER_SECONDS": "2",
    "REVIEWERS_INTERVAL_SECONDS": "0.5",
    "TASKS_START_SLA_SECONDS": "600",
}


def start_prometheus(procs: Processes, tmp_path: Path, target: str) -> str:
    """Prometheus scraping `target` (host:port) and evaluating the alerts every second; returns
    its base URL once it is ready. Stopped with the roles."""
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(ROOT / "deploy" / "prometheus" / "alerts.yml")],
        "scrape_configs": [{"job_name": "scheduler", "static_configs": [{"targets": [target]}]}],
    }
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    proc = subprocess.Popen(
        [
            "prometheus",
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=(tmp_path / "prometheus.log").open("wb"),
        stderr=subprocess.STDOUT,
    )
    procs.started.append(proc)
    base = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        try:
            return requests.get(f"{base}/-/ready", timeout=2).status_code == 200
        except requests.RequestException:
            return False

    wait_for(ready, timeout=30, interval=0.2, details=procs.logs)
    return base


def query(prometheus: str, promql: str) -> list[dict]:
    answer = requests.get(f"{prometheus}/api/v1/query", params={"query": promql}, timeout=5)
    assert answer.status_code == 200, answer.text
    return answer.json()["data"]["result"]


def firing(prometheus: str) -> set[str]:
    alerts = requests.get(f"{prometheus}/api/v1/alerts", timeout=5).json()["data"]["alerts"]
    return {a["labels"]["alertname"] for a in alerts if a["state"] == "firing"}


def test_workers_dying_fires_on_the_first_rescue(processes, gunicorn, tmp_path) -> None:  # noqa: F811
    api = gunicorn(workers=1)
    prometheus = start_prometheus(processes, tmp_path, api.removeprefix("http://"))
    task = TaskFactory(payload={"name": "sleep", "args": {"seconds": 120}}, max_attempts=3)
    run = RunFactory(task=task)
    env = process_env(**TIMING)
    worker = processes.start("runworker", "--concurrency", "1", env=env)
    processes.start("runreviewer", env=env)
    wait_for(
        lambda: Run.objects.filter(pk=run.pk, status="running").exists(),
        timeout=30,
        details=processes.logs,
    )
    # Prometheus has the rescue counter at 0 before anything was rescued: the series it will
    # see rise.
    rescued = 'scheduler_run_attempts_total{kind="handler", outcome="rescued"}'
    wait_for(lambda: query(prometheus, rescued), timeout=30, interval=0.5, details=processes.logs)
    assert [float(s["value"][1]) for s in query(prometheus, rescued)] == [0.0]
    assert "WorkersDying" not in firing(prometheus)

    worker.send_signal(signal.SIGKILL)
    worker.wait(timeout=10)
    wait_for(
        lambda: Attempt.objects.filter(run=run, outcome="rescued").exists(),
        timeout=30,
        details=processes.logs,
    )

    wait_for(lambda: "WorkersDying" in firing(prometheus), timeout=30, interval=0.5)
    assert Attempt.objects.filter(outcome="rescued").count() == 1
