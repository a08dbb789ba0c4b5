"""The Job an executable run becomes: a valid batch/v1 Job whose container fetches the
executable, checks its SHA-256 and runs it only when the hash matches."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import kubernetes_validate
import pytest

from tasks.transitions.claim import ClaimedRun
from tasks.worker.k8s_job import HASH_MISMATCH, HASH_MISMATCH_EXIT, job_manifest

SCRIPT = b'#!/bin/sh\necho "ran with $1"\ntouch "$MARKER"\n'


def claimed_run(**fields: object) -> ClaimedRun:
    now = datetime.now(UTC)
    values: dict = dict(
        id=uuid.uuid4(),
        task_id=uuid.uuid4(),
        scheduled_at=now,
        execute_at=now,
        attempt=1,
        max_attempts=3,
        kind="executable",
        payload={"args": ["x"]},
        executable="executables/abc/job.sh",
        timeout=30.0,
        backoff_base=2.0,
        backoff_cap=60.0,
        claimed_at=now,
        overlap="allow",
        priority=0,
        cpu_millis=500,
        memory_bytes=2**26,
    )
    return ClaimedRun(**(values | fields))


def manifest(sha256: str = "0" * 64, url: str = "http://127.0.0.1:1/x") -> dict:
    return job_manifest(
        claimed_run(),
        resources={"cpu": "500m", "memory": "64Mi"},
        url=url,
        sha256=sha256,
        timeout=30,
    )


@pytest.mark.parametrize("version", ["1.30.0", kubernetes_validate.latest_version()])
def test_the_manifest_is_a_valid_job(version: str) -> None:
    kubernetes_validate.validate(manifest(), version, strict=True)  # raises when it is not


def test_an_invalid_manifest_is_refused() -> None:
    # The check above could fail: a field of the wrong type is refused.
    broken = manifest()
    broken["spec"]["backoffLimit"] = "none"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, "1.30.0", strict=True)


@pytest.fixture
def served() -> Iterator[str]:
    """SCRIPT over HTTP on a port of this test's own: what the presigned URL gives a pod."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(SCRIPT)))
            self.end_headers()
            self.wfile.write(SCRIPT)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/job.sh"
    server.shutdown()
    thread.join()


def run_container(job: dict, tmp_path: Path, path: str) -> subprocess.CompletedProcess:
    """The container's command and args as the pod runs them, with its env."""
    container = job["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"]}
    env |= {"PATH": path, "MARKER": str(tmp_path / "ran"), "TMPDIR": str(tmp_path)}
    return subprocess.run(
        [*container["command"], *container["args"]],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
    )


def only(tmp_path: Path, *tools: str) -> str:
    """A PATH holding these tools alone (an image without sha256sum, say)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in tools:
        # python3: this interpreter itself (a `python3` on PATH may be a shim needing bash).
        found = os.path.realpath(sys.executable) if tool == "python3" else shutil.which(tool)
        assert found, tool
        (bin_dir / tool).symlink_to(found)
    return str(bin_dir)


BASE = ("sh", "mktemp", "chmod", "curl", "touch")


@pytest.mark.parametrize("hasher", ["sha256sum", "python3"])
def test_the_pod_runs_the_executable_whose_hash_matches(served, tmp_path, hasher) -> None:
    job = manifest(sha256=hashlib.sha256(SCRIPT).hexdigest(), url=served)

    done = run_container(job, tmp_path, only(tmp_path, *BASE, hasher))

    assert (done.returncode, done.stdout) == (0, "ran with x\n"), done.stderr
    assert (tmp_path / "ran").exists()


@pytest.mark.parametrize("hasher", ["sha256sum", "python3"])
def test_the_pod_refuses_bytes_whose_hash_differs(served, tmp_path, hasher) -> None:
    expected = hashlib.sha256(b"what was uploaded").hexdigest()
    job = manifest(sha256=expected, url=served)

    done = run_container(job, tmp_path, only(tmp_path, *BASE, hasher))

    assert done.returncode == HASH_MISMATCH_EXIT
    got = hashlib.sha256(SCRIPT).hexdigest()
    assert done.stderr == f"{HASH_MISMATCH} {got}, not {expected}: not run\n"
    assert done.stdout == "" and not (tmp_path / "ran").exists(), "the payload never ran"
