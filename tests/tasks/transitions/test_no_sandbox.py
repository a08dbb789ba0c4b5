"""Executables without a sandbox, in one process against PostgreSQL: the claim of a worker that
has none leaves executable runs alone, the reviewer makes them wait with the workers' reason
(and schedules them again once a worker can), /health and the create answer say so."""

from __future__ import annotations

import json
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from tasks.models import Process, Run, Task
from tasks.transitions import claim
from tasks.transitions.no_sandbox import hold_or_release_executables
from tasks.worker.executors import ExecutionResult, execute
from tasks.worker.flight import InFlight
from tests.factories import RunFactory, TaskFactory

pytestmark = pytest.mark.django_db

MISSING = "bubblewrap (bwrap) is not installed"
NO_SANDBOX = claim.Capacity(executables=False)


def worker_row(name: str, sandbox: str, *, seen_ago: float = 0.0) -> Process:
    now = datetime.now(UTC)
    return Process.objects.create(
        name=name,
        role="worker",
        host="h",
        pid=1,
        started_at=now - timedelta(minutes=1),
        last_seen_at=now - timedelta(seconds=seen_ago),
        sandbox=sandbox,
        sandbox_error="" if sandbox else MISSING,
    )


def executable_run(**fields) -> Run:
    task = TaskFactory(kind=Task.Kind.EXECUTABLE, payload={"args": []}, executable="job.sh")
    return RunFactory(task=task, **fields)


def claim_runs(capacity: claim.Capacity) -> list[claim.ClaimedRun]:
    return claim.claim_runs(
        worker="w", limit=10, prefetch_seconds=0, owner_cap=0, capacity=capacity
    )


def test_a_worker_without_a_sandbox_claims_every_kind_but_executables() -> None:
    executable = executable_run(priority=9)
    handler = RunFactory(task=TaskFactory(priority=0))
    claimed = claim_runs(NO_SANDBOX)
    assert [r.id for r in claimed] == [handler.pk]
    executable.refresh_from_db()
    assert (executable.status, executable.attempt) == ("scheduled", 0)
    # Nor does it wake for it: the next due run it could take is none.
    assert claim.seconds_until_next_due(NO_SANDBOX) is None
    assert claim.seconds_until_next_due(claim.NO_LIMIT) is not None
    # A worker with a sandbox takes it.
    assert [r.id for r in claim_runs(claim.NO_LIMIT)] == [executable.pk]


def test_the_reviewer_holds_executable_runs_while_no_live_worker_can_run_them() -> None:
    run = executable_run()
    later = executable_run(execute_at=datetime.now(UTC) + timedelta(hours=1))
    handler = RunFactory()
    assert hold_or_release_executables(dead_after_seconds=15) == (0, 0, "")  # no worker at all
    worker_row("w-1", "")
    worker_row("w-old", "bwrap", seen_ago=60)  # dead: it counts for nothing

    held, released, why = hold_or_release_executables(dead_after_seconds=15)

    assert (held, released) == (1, 0)
    assert why.startswith(f"no live worker can run executables: {MISSING}")
    run.refresh_from_db()
    assert (run.status, run.wait_reason, run.attempt) == ("waiting_for_resource", why, 0)
    assert Run.objects.get(pk=later.pk).status == "scheduled"  # not due yet
    assert Run.objects.get(pk=handler.pk).status == "scheduled"
    assert hold_or_release_executables(dead_after_seconds=15)[:2] == (0, 0)  # written once

    worker_row("w-2", "bwrap")
    assert hold_or_release_executables(dead_after_seconds=15) == (0, 1, "")
    run.refresh_from_db()
    assert (run.status, run.wait_reason, run.attempt) == ("scheduled", "", 0)


def test_a_run_the_start_sla_flagged_shows_the_sandbox_as_its_reason() -> None:
    run = executable_run(
        status="waiting_for_resource",
        wait_kind="start_sla",
        wait_reason="not started within the start SLA (10.0 s)",
    )
    worker_row("w-1", "")
    assert hold_or_release_executables(dead_after_seconds=15)[0] == 1
    run.refresh_from_db()
    assert run.wait_reason.startswith(f"no live worker can run executables: {MISSING}")


def test_the_reviewer_leaves_a_run_waiting_for_resources_alone() -> None:
    run = executable_run(
        status="waiting_for_resource",
        wait_kind="resources",
        wait_reason="no live worker offers cpu=64",
    )
    worker_row("w-1", "")
    assert hold_or_release_executables(dead_after_seconds=15)[:2] == (0, 0)
    run.refresh_from_db()
    assert run.wait_reason == "no live worker offers cpu=64"


def test_health_is_degraded_while_a_live_worker_cannot_run_executables(client) -> None:
    now = datetime.now(UTC)
    for role in ("scheduler", "reviewer"):
        Process.objects.create(
            name=role, role=role, host="h", pid=1, started_at=now, last_seen_at=now
        )
    able = worker_row("w-able", "bwrap")
    response = client.get("/health")
    assert response.status_code == 200 and response.json()["status"] == "ok", response.json()
    entry = response.json()["components"]["executables"]
    assert entry["status"] == "ok" and entry["available"] is True
    assert entry["workers"] == [
        {"name": able.name, "host": "h", "pid": 1, "sandbox": "bwrap", "error": ""}
    ]

    worker_row("w-unable", "")
    response = client.get("/health")
    assert response.status_code == 200  # degraded, not down: other kinds still run
    body = response.json()
    assert body["status"] == "warning"
    entry = body["components"]["executables"]
    assert entry["status"] == "warning" and entry["available"] is True
    assert entry["error"] == f"1 of 2 live workers cannot run executables: {MISSING}"
    assert [w["sandbox"] for w in entry["workers"]] == ["bwrap", None]

    able.delete()
    entry = client.get("/health").json()["components"]["executables"]
    assert entry["status"] == "warning" and entry["available"] is False


def upload(api: APIClient, content: bytes = b"#!/bin/sh\necho hi\n") -> dict:
    response = api.post(
        "/api/v1/tasks/upload",
        {"payload": json.dumps({"args": []}), "file": SimpleUploadedFile("job.sh", content)},
        format="multipart",
    )
    assert response.status_code == 201, response.content
    return response.json()


def test_creating_an_executable_task_no_worker_can_run_warns(api: APIClient) -> None:
    worker_row("w-1", "")
    body = upload(api)
    assert body["warnings"] == [
        f"no live worker can run executables: {MISSING}; its runs wait until a worker can run them"
    ]
    assert body["kind"] == "executable" and body["runs"][0]["status"] == "scheduled"
    # A handler task never warns; nor does an executable one once a worker can run it.
    handler = api.post(
        "/api/v1/tasks", {"kind": "handler", "payload": {"name": "noop"}}, format="json"
    )
    assert handler.status_code == 201 and "warnings" not in handler.json()
    worker_row("w-2", "rlimit")
    assert "warnings" not in upload(api)


def test_uploading_a_file_without_a_shebang_warns_that_its_runs_will_fail(api: APIClient) -> None:
    worker_row("w-1", "bwrap")
    body = upload(api, b"print('no shebang')\n")
    (warning,) = body["warnings"]
    assert warning.startswith("no shebang: the file starts with neither '#!'"), warning
    assert warning.endswith("; every run of this file will fail")
    assert body["executable"]  # stored all the same


def test_the_schema_has_warnings_as_an_optional_list(anon: APIClient) -> None:
    schema = anon.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    task = schema["components"]["schemas"]["TaskOutput"]
    assert task["properties"]["warnings"]["type"] == "array"
    assert "no live worker can run executables" in task["properties"]["warnings"]["description"]
    assert "warnings" not in task["required"]


def claimed_executable(name: str) -> claim.ClaimedRun:
    now = datetime.now(UTC)
    return claim.ClaimedRun(
        id=uuid.uuid4(),
        task_id=uuid.uuid4(),
        scheduled_at=now,
        execute_at=now,
        attempt=1,
        max_attempts=5,
        kind="executable",
        payload={"args": []},
        executable=name,
        timeout=10.0,
        backoff_base=2.0,
        backoff_cap=60.0,
        claimed_at=now,
        overlap="allow",
        priority=5,
        cpu_millis=0,
        memory_bytes=0,
    )


def outcome_of(run: claim.ClaimedRun) -> tuple[ExecutionResult, claim.Outcome]:
    result = execute(run, cancel=threading.Event(), timeout=10.0)
    flight = InFlight(
        run=run,
        claimed_mono=time.monotonic(),
        start_mono=time.monotonic(),
        claim_seq=1,
        started_mono=time.monotonic(),
    )
    return result, flight.outcome(result, release=result.no_sandbox)


def test_an_upload_without_a_shebang_fails_at_once_without_retries(settings, tmp_path) -> None:
    settings.MEDIA_ROOT = tmp_path
    settings.SCHEDULER_SANDBOX_ALLOW_RLIMIT_ONLY = True
    name = default_storage.save("executables/job.py", ContentFile(b"print('hello')\n"))
    result, outcome = outcome_of(claimed_executable(name))
    assert result.error.startswith("no shebang: ") and result.final
    assert (outcome.status, outcome.attempt_outcome) == ("failed", "failed")  # attempt 1 of 5
    shebang = default_storage.save(
        "executables/ok.py", ContentFile(b"#!/usr/bin/env python3\nprint('hello')\n")
    )
    result, outcome = outcome_of(claimed_executable(shebang))
    assert (result.ok, result.output, outcome.status) == (True, "hello\n", "succeeded")


def test_a_sandbox_gone_since_the_claim_gives_the_run_back(settings, tmp_path, monkeypatch) -> None:
    settings.MEDIA_ROOT = tmp_path
    settings.SCHEDULER_SANDBOX_ALLOW_RLIMIT_ONLY = False
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on it
    name = default_storage.save("executables/job.sh", ContentFile(b"#!/bin/sh\necho hi\n"))
    result, outcome = outcome_of(claimed_executable(name))
    assert result.no_sandbox and MISSING in result.error
    assert (outcome.status, outcome.attempt_outcome, outcome.retry_in) == (
        "scheduled",
        "released",
        0.0,
    )
