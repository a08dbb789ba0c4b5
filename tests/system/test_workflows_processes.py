"""Workflows with real worker and reviewer processes: a diamond passes outputs downstream and no
step starts before its upstream steps ended; a failing root runs the `on: failure` and `always`
steps and skips the `on: success` ones, and the workflow run ends by the status rule; an http
step sends its upstream outputs in its body and passes its response body on."""

from __future__ import annotations

import json
import signal
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import tests.handlers  # noqa: F401 (the API validates step bodies against these handlers)
from tasks.models import Run, WorkflowRun, WorkflowStep
from tests.conftest import client_for, process_env, wait_for
from tests.factories import UserFactory

pytestmark = pytest.mark.processes


def step_body(name: str, sleep: float = 0.0) -> dict:
    return {"kind": "handler", "payload": {"name": "step", "args": {"name": name, "sleep": sleep}}}


FAIL = {
    "kind": "handler",
    "payload": {"name": "fail"},
    "max_attempts": 2,
    "retry_backoff": {"base": 0.1, "cap": 0.1},
}


def run_workflow(processes, steps: list[dict]) -> tuple[dict, dict[str, Run]]:
    """Create and start the workflow over the API, with two workers and a reviewer running;
    wait for the workflow run to end; return its body and each step's run."""
    env = process_env(
        SCHEDULER_HANDLER_MODULES="tests.handlers", SCHEDULER_OUTBOUND_ALLOW="127.0.0.1"
    )
    processes.start("runworker", "--concurrency", "2", env=env)
    processes.start("runworker", "--concurrency", "2", env=env)
    processes.start("runreviewer", env=env)
    api = client_for(UserFactory())
    created = api.post("/api/v1/workflows", {"name": "wf", "steps": steps}, format="json")
    assert created.status_code == 201, created.content
    started = api.post(f"/api/v1/workflows/{created.json()['id']}/run")
    assert started.status_code == 201, started.content
    workflow_run_id = started.json()["id"]
    wait_for(
        lambda: WorkflowRun.objects.get(pk=workflow_run_id).status != "running",
        timeout=60,
        interval=0.2,
        details=processes.logs,
    )
    body = api.get(f"/api/v1/workflow-runs/{workflow_run_id}").json()
    runs = {
        s.step_id: s.run
        for s in WorkflowStep.objects.filter(workflow_run_id=workflow_run_id).select_related("run")
    }
    return body, runs


def assert_after_upstream(steps: list[dict], runs: dict[str, Run]) -> None:
    """No step started before every step it waits for had finished (the database's times)."""
    for step in steps:
        run = runs[step["id"]]
        if run.started_at is None:
            continue
        for name in step.get("after", []):
            upstream = runs[name]
            assert upstream.finished_at is not None
            assert run.started_at >= upstream.finished_at, (step["id"], name)


def test_a_diamond_passes_outputs_downstream_and_runs_each_step_after_its_upstream(processes):
    steps = [
        {"id": "a", "task": step_body("a")},
        {"id": "b", "after": ["a"], "task": step_body("b", sleep=1)},
        {"id": "c", "after": ["a"], "task": step_body("c", sleep=1)},
        {"id": "d", "after": ["b", "c"], "task": step_body("d")},
    ]
    body, runs = run_workflow(processes, steps)
    assert body["status"] == "succeeded", body
    assert [(s["id"], s["status"]) for s in body["steps"]] == [
        ("a", "succeeded"),
        ("b", "succeeded"),
        ("c", "succeeded"),
        ("d", "succeeded"),
    ]
    outputs = {s["id"]: s["output"] for s in body["steps"]}
    a_output = {"name": "a", "received": {}}
    assert outputs["a"] == a_output
    assert outputs["b"] == {"name": "b", "received": {"a": {"output": a_output}}}
    assert outputs["d"] == {
        "name": "d",
        "received": {"b": {"output": outputs["b"]}, "c": {"output": outputs["c"]}},
    }
    assert_after_upstream(steps, runs)
    # b and c ran at the same time (four executor slots, one second each).
    assert runs["b"].started_at < runs["c"].finished_at
    assert runs["c"].started_at < runs["b"].finished_at
    assert all(run.attempt == 1 for run in runs.values())
    # Released by the upstream's end, not found by a poll: each step started within a second
    # of its last upstream step's end (idle workers, woken by the release's NOTIFY).
    for name, upstream in (("b", ["a"]), ("c", ["a"]), ("d", ["b", "c"])):
        ended = max(runs[u].finished_at for u in upstream)
        assert runs[name].started_at - ended < timedelta(seconds=1), name


def test_a_failed_root_runs_the_failure_and_always_steps_and_skips_the_success_ones(processes):
    steps = [
        {"id": "a", "task": FAIL},
        {"id": "load", "after": ["a"], "task": step_body("load")},
        {"id": "report", "after": ["load"], "task": step_body("report")},
        {"id": "alert", "after": ["a"], "on": "failure", "task": step_body("alert")},
        {"id": "cleanup", "after": ["a"], "on": "always", "task": step_body("cleanup")},
    ]
    body, runs = run_workflow(processes, steps)
    found = {s["id"]: s for s in body["steps"]}
    assert {name: s["status"] for name, s in found.items()} == {
        "a": "failed",
        "load": "skipped",
        "report": "skipped",
        "alert": "succeeded",
        "cleanup": "succeeded",
    }
    assert runs["a"].attempt == 2  # its retries first: the release waits for the final outcome
    assert found["load"]["reason"] == "skipped: runs on success, upstream a failed"
    assert found["report"]["reason"] == "skipped: runs on success, upstream load skipped"
    # The failure handled by an `on: failure` step that ran: succeeded (docs/workflows.md).
    assert body["status"] == "succeeded"
    assert body["finished_at"] is not None
    assert_after_upstream(steps, runs)


class EchoHandler(BaseHTTPRequestHandler):
    """Answers a POST with the JSON body it received, under `got`."""

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        answer = json.dumps({"got": json.loads(body or b"null")}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: object) -> None:
        pass


def test_an_http_step_gets_its_upstream_outputs_in_its_body_and_passes_its_response_on(
    processes, settings
):
    settings.SCHEDULER_OUTBOUND_ALLOW = ["127.0.0.1"]
    server = ThreadingHTTPServer(("127.0.0.1", 0), EchoHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/hook"
        http = {"kind": "http", "payload": {"method": "POST", "url": url, "body": {"k": 1}}}
        steps = [
            {"id": "a", "task": step_body("a")},
            {"id": "post", "after": ["a"], "task": http},
            {"id": "z", "after": ["post"], "task": step_body("z")},
        ]
        body, _ = run_workflow(processes, steps)
    finally:
        server.shutdown()
    assert body["status"] == "succeeded", body
    outputs = {s["id"]: s["output"] for s in body["steps"]}
    sent = {"k": 1, "context": {"steps": {"a": {"output": outputs["a"]}}}}
    assert outputs["post"] == {"got": sent}
    assert outputs["z"]["received"] == {"post": {"output": {"got": sent}}}


def test_a_step_whose_worker_is_killed_is_rescued_and_the_workflow_run_still_ends(processes):
    timing = {
        "TASKS_HEARTBEAT_SECONDS": "0.5",
        "REVIEWERS_RESCUE_AFTER_SECONDS": "2",
        "REVIEWERS_INTERVAL_SECONDS": "0.5",
        "TASKS_START_SLA_SECONDS": "600",
    }
    env = process_env(SCHEDULER_HANDLER_MODULES="tests.handlers", **timing)
    doomed = processes.start("runworker", "--concurrency", "2", env=env)
    processes.start("runreviewer", env=env)
    slow = {"name": "step", "args": {"name": "b", "first_sleep": 60}}
    steps = [
        {"id": "a", "task": step_body("a")},
        {"id": "b", "after": ["a"], "task": {"kind": "handler", "payload": slow}},
        {"id": "c", "after": ["b"], "task": step_body("c")},
    ]
    api = client_for(UserFactory())
    created = api.post("/api/v1/workflows", {"name": "wf", "steps": steps}, format="json")
    workflow_run_id = api.post(f"/api/v1/workflows/{created.json()['id']}/run").json()["id"]

    def step(name: str) -> Run:
        return Run.objects.get(
            workflow_step__workflow_run_id=workflow_run_id, workflow_step__step_id=name
        )

    wait_for(lambda: step("b").status == "running", timeout=60, details=processes.logs)
    doomed.send_signal(signal.SIGKILL)
    doomed.wait(10)
    processes.start("runworker", "--concurrency", "2", env=env)
    wait_for(
        lambda: WorkflowRun.objects.get(pk=workflow_run_id).status != "running",
        timeout=60,
        interval=0.2,
        details=processes.logs,
    )
    body = api.get(f"/api/v1/workflow-runs/{workflow_run_id}").json()
    assert body["status"] == "succeeded", body
    b, c = step("b"), step("c")
    assert b.attempt == 2  # rescued from the killed worker, then run again
    assert c.attempt == 1 and c.started_at >= b.finished_at
    assert WorkflowStep.objects.filter(workflow_run_id=workflow_run_id).count() == 3
