"""What running a claimed Run actually does: one entry point per task kind."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass

from django.conf import settings

from scheduler_project import outbound_http as http
from tasks import handlers
from tasks.storage import local_executable
from tasks.transitions.claim import ClaimedRun
from tasks.worker import sandbox
from tasks.worker.zombie_tracker import Activity


@dataclass(frozen=True)
class ExecutionResult:
    ok: bool
    error: str = ""
    output: str = ""
    exit_code: int | None = None
    http_status: int | None = None
    timed_out: bool = False
    cancelled: bool = False
    no_sandbox: bool = False  # it could not start: no sandbox here (the run is given back)
    final: bool = False  # another attempt would fail the same way: no retry


def cap_output(text: str) -> str:
    limit = settings.TASKS_OUTPUT_MAX_BYTES
    data = text.encode("utf-8", errors="replace")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", errors="ignore") + "\n[output truncated]"


def execute(
    run: ClaimedRun, *, cancel: threading.Event, timeout: float, activity: Activity | None = None
) -> ExecutionResult:
    """Run the payload of `run` once. Never raises: every failure becomes a result. An
    executable reports its process tree and output to `activity` (zombie detection)."""
    try:
        if run.kind == "handler":
            return _run_handler(run)
        if run.kind == "http":
            return _run_http(run, timeout=timeout)
        if run.kind == "executable":
            return _run_executable(run, cancel=cancel, timeout=timeout, activity=activity)
        return ExecutionResult(ok=False, error=f"unknown task kind {run.kind!r}")
    except Exception as exc:  # a payload's failure is an outcome, not a worker crash
        return ExecutionResult(ok=False, error=f"{type(exc).__name__}: {exc}")


def _run_handler(run: ClaimedRun) -> ExecutionResult:
    name = run.payload.get("name", "")
    fn = handlers.get(name)
    if fn is None:
        return ExecutionResult(ok=False, error=f"no handler registered as {name!r}")
    context = handlers.HandlerContext(
        task_id=str(run.task_id),
        run_id=str(run.id),
        attempt=run.attempt,
        scheduled_at=run.scheduled_at,
        idempotency_key=run.idempotency_key,
        steps=(run.payload.get("context") or {}).get("steps") or {},
    )
    value = fn(context, **(run.payload.get("args") or {}))
    output = "" if value is None else json.dumps(value, default=str)
    return ExecutionResult(ok=True, output=cap_output(output))


def _run_http(run: ClaimedRun, *, timeout: float) -> ExecutionResult:
    payload = run.payload
    headers = dict(payload.get("headers") or {})
    headers["Idempotency-Key"] = run.idempotency_key
    headers["X-Scheduler-Run-Id"] = str(run.id)
    body = payload.get("body")
    json_body = None
    if isinstance(body, dict) and "context" in payload:
        # A workflow step's upstream outputs (docs/workflows.md) join a JSON object body.
        body = {**body, "context": payload["context"]}
    if isinstance(body, (dict, list)):
        json_body, body = body, None
    response = http.send(
        payload.get("method", "GET").upper(),
        payload["url"],
        headers=headers,
        body=body,
        json=json_body,
        timeout=min(float(payload.get("timeout") or timeout), timeout),
        allow=settings.SCHEDULER_OUTBOUND_ALLOW,
    )
    expected = payload.get("expect_status") or list(range(200, 300))
    output = cap_output(response.text)
    if response.status_code in expected:
        return ExecutionResult(ok=True, output=output, http_status=response.status_code)
    return ExecutionResult(
        ok=False,
        output=output,
        http_status=response.status_code,
        error=f"HTTP {response.status_code} is not an expected status",
    )


def _run_executable(
    run: ClaimedRun, *, cancel: threading.Event, timeout: float, activity: Activity | None
) -> ExecutionResult:
    try:
        mode = sandbox.sandbox_mode(allow_rlimit_only=settings.SCHEDULER_SANDBOX_ALLOW_RLIMIT_ONLY)
    except sandbox.SandboxUnavailable as exc:  # removed between the heartbeat and the claim
        return ExecutionResult(ok=False, error=str(exc), no_sandbox=True)
    env = run.environment()
    # A workflow step's upstream outputs (tasks/sql/workflows.sql puts them in the payload).
    context = run.payload.get("context")
    # On local storage the file itself; on S3 fetched once into this host's cache.
    with local_executable(run.executable) as path:
        refused = sandbox.check_interpreter(str(path))
        if refused:  # never handed to /bin/sh as a guess
            return ExecutionResult(ok=False, error=refused, final=True)
        result = sandbox.run_executable(
            str(path),
            args=[str(a) for a in run.payload.get("args") or []],
            env=env,
            timeout=timeout,
            limits=sandbox.Limits(output_bytes=settings.TASKS_OUTPUT_MAX_BYTES),
            cancel=cancel,
            mode=mode,
            activity=activity,
            context=None if context is None else json.dumps(context).encode(),
        )
    return ExecutionResult(
        ok=result.exit_code == 0 and not result.timed_out and not result.cancelled,
        error=result.error,
        output=result.output,
        exit_code=result.exit_code,
        timed_out=result.timed_out,
        cancelled=result.cancelled,
    )
