"""Hostile payloads against tasks.worker.sandbox, in both modes (pure: no database, no Django)."""

from __future__ import annotations

import glob
import os
import shutil
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest

from tasks.worker import sandbox
from tasks.worker.sandbox import (
    ExecResult,
    Limits,
    SandboxUnavailable,
    run_executable,
    sandbox_mode,
)
from tests.tasks.support import alive_with

BWRAP_REASON = sandbox._bwrap_variant()[1]
MODES = [
    pytest.param("rlimit", id="rlimit"),
    pytest.param(
        "bwrap", id="bwrap", marks=pytest.mark.skipif(bool(BWRAP_REASON), reason=BWRAP_REASON)
    ),
]
ENV = {"SCHEDULER_RUN_ID": "run-1", "SCHEDULER_TASK_ID": "task-1"}


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def marker() -> str:
    """A unique `sleep` argument, so leftover processes can be found on the host in /proc."""
    return f"31337.{uuid.uuid4().int % 10**9}"


def run(
    tmp_path: Path, mode: str, script: str, *, timeout: float | None = 10, **kw: object
) -> ExecResult:
    path = tmp_path / "payload.sh"
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o600)  # uploaded files are not executable; the sandbox copies and chmods
    limits = kw.pop("limits", Limits())
    return run_executable(
        str(path), args=["arg1"], env=ENV, timeout=timeout, limits=limits, mode=mode, **kw
    )


def workdirs_with(canary: str) -> list[str]:
    return glob.glob(os.path.join(tempfile.gettempdir(), "sched-run-*", canary))


def test_success_captures_output(tmp_path: Path, mode: str) -> None:
    canary = f"canary-{uuid.uuid4().hex}"
    res = run(tmp_path, mode, f'touch {canary}; echo "out $1"; echo err >&2')
    assert (res.exit_code, res.error, res.timed_out, res.cancelled) == (0, "", False, False)
    assert res.output == "out arg1\nerr\n"
    assert workdirs_with(canary) == []


def test_nonzero_exit(tmp_path: Path, mode: str) -> None:
    res = run(tmp_path, mode, "echo failing; exit 3")
    assert (res.exit_code, res.error, res.output) == (3, "exit code 3", "failing\n")


def test_environment_is_isolated(
    tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SANDBOX_SECRET_CANARY", "hunter2")
    res = run(tmp_path, mode, "env")
    seen = dict(line.split("=", 1) for line in res.output.splitlines())
    assert "SANDBOX_SECRET_CANARY" not in seen and "hunter2" not in res.output
    seen.pop("PWD", None)  # exported by the shell itself
    assert seen == {**ENV, "PATH": "/usr/bin:/bin"}


def test_timeout_kills_setsid_daemon(tmp_path: Path, mode: str, marker: str) -> None:
    canary = f"canary-{uuid.uuid4().hex}"
    script = f"""touch {canary}
(setsid sh -c 'echo daemon=$$; exec sleep {marker}' > /dev/null 2>&1 &)
setsid sh -c 'echo daemon=$$; exec sleep {marker}' &
sleep 0.3; echo started; sleep 1000
"""
    res = run(tmp_path, mode, script, timeout=1)
    assert res.timed_out and res.exit_code is None
    assert res.error == "timed out after 1s"
    assert "started" in res.output and res.duration < 5
    assert alive_with(marker) == []
    if mode == "rlimit":  # host pids: check the echoed one directly too
        pid = int(res.output.split("daemon=")[1].split()[0])
        assert (
            not os.path.exists(f"/proc/{pid}")
            or marker.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
        )
    assert workdirs_with(canary) == []


def test_daemon_left_behind_on_exit_is_killed(tmp_path: Path, mode: str, marker: str) -> None:
    res = run(tmp_path, mode, f"(setsid sleep {marker} &)\necho done")
    assert (res.exit_code, res.output) == (0, "done\n")
    assert alive_with(marker) == []


def test_disk_filler_stopped_by_file_size_limit(tmp_path: Path, mode: str) -> None:
    limits = Limits(file_size_bytes=2 * 2**20)
    res = run(tmp_path, mode, "dd if=/dev/zero of=big bs=1M count=1000", limits=limits)
    assert res.exit_code == 128 + 25
    assert "SIGXFSZ: file size limit exceeded" in res.error


def test_output_cap_without_deadlock(tmp_path: Path, mode: str) -> None:
    limits = Limits(output_bytes=64 * 1024)
    res = run(
        tmp_path, mode, "head -c 10000000 /dev/zero | tr '\\0' x; echo tail >&2", limits=limits
    )
    assert res.exit_code == 0 and res.duration < 10
    assert len(res.output) <= limits.output_bytes
    assert res.output.startswith("x" * 1000) and "output truncated" in res.output


def test_cancel_stops_sleeping_payload(tmp_path: Path, mode: str, marker: str) -> None:
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    start = time.monotonic()
    res = run(tmp_path, mode, f"sleep {marker}", timeout=None, cancel=cancel)
    assert res.cancelled and not res.timed_out and res.exit_code is None
    assert res.error == "cancelled"
    assert time.monotonic() - start < 1.5
    assert alive_with(marker) == []


def test_fork_bomb_is_contained(tmp_path: Path, mode: str, marker: str) -> None:
    script = f"for i in $(seq 200); do sleep {marker} & done; echo spawned; wait"
    res = run(tmp_path, mode, script, timeout=2, limits=Limits(processes=32))
    # Either RLIMIT_NPROC stops it (payload runs as nobody) or it sits in its pid namespace
    # until the timeout; in both cases nothing may outlive the run.
    assert "Cannot fork" in res.output or (mode == "bwrap" and res.timed_out), res
    assert res.duration < 8
    assert alive_with(marker) == []


def test_sandbox_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    expected = "rlimit" if BWRAP_REASON else "bwrap"
    assert sandbox_mode(allow_rlimit_only=True) == expected
    monkeypatch.setattr(sandbox, "_bwrap_variant", lambda: (None, "bwrap is not installed"))
    assert sandbox_mode(allow_rlimit_only=True) == "rlimit"
    with pytest.raises(SandboxUnavailable, match="SCHEDULER_SANDBOX_ALLOW_RLIMIT_ONLY=true"):
        sandbox_mode(allow_rlimit_only=False)


def payload_file(tmp_path: Path, content: bytes) -> str:
    path = tmp_path / "job.py"
    path.write_bytes(content)
    path.chmod(0o600)
    return str(path)


def test_the_shebang_picks_the_interpreter(tmp_path: Path, mode: str) -> None:
    # Python, not sh: under /bin/sh the second line would be a syntax error.
    path = payload_file(
        tmp_path, b"#!/usr/bin/env python3\nimport sys; print('py', 6 * 7, sys.argv[1:])\n"
    )
    res = run_executable(path, args=["a b"], env=ENV, timeout=10, limits=Limits(), mode=mode)
    assert (res.exit_code, res.error, res.output) == (0, "", "py 42 ['a b']\n")


def test_a_file_without_a_shebang_is_refused_not_run_under_sh(tmp_path: Path, mode: str) -> None:
    canary = tmp_path / f"ran-{uuid.uuid4().hex}"
    # Valid sh (bwrap's execvp() would have run it with /bin/sh), and valid Python too.
    path = payload_file(tmp_path, f"import os\nopen('{canary}', 'w').close()\n".encode())
    assert sandbox.check_interpreter(path).startswith("no shebang: ")
    res = run_executable(path, args=[], env=ENV, timeout=10, limits=Limits(), mode=mode)
    assert res.exit_code is None and res.error.startswith("no shebang: ") and res.output == ""
    assert not canary.exists()
    elf = payload_file(tmp_path, b"\x7fELF" + b"\0" * 60)
    assert sandbox.check_interpreter(elf) == ""  # a binary is exec'd as it is


REAL_BWRAP = shutil.which("bwrap")  # looked up before any test changes PATH


def test_bubblewrap_installed_later_is_found_without_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PATH holds only a directory of the test's: bwrap appears in it, then goes again."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    mode, why = sandbox.capability(allow_rlimit_only=False)
    assert mode == "" and why.startswith("bubblewrap (bwrap) is not installed; install bubblewrap")
    assert sandbox.capability(allow_rlimit_only=True) == ("rlimit", "")

    broken = bin_dir / "bwrap"  # installed, but unable to make a sandbox (no user namespaces)
    broken.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"
    )
    broken.chmod(0o755)
    mode, why = sandbox.capability(allow_rlimit_only=False)
    assert mode == "" and "bwrap is installed but cannot run here" in why, why
    assert "No permissions to create new namespace" in why
    broken.unlink()

    if REAL_BWRAP is None or BWRAP_REASON:
        pytest.skip(f"no working bubblewrap on this machine to link in: {BWRAP_REASON}")
    (bin_dir / "bwrap").symlink_to(REAL_BWRAP)
    assert sandbox.capability(allow_rlimit_only=False) == ("bwrap", "")
    (bin_dir / "bwrap").unlink()
    assert sandbox.capability(allow_rlimit_only=False)[0] == ""


def test_a_context_is_a_file_the_payload_alone_reads(tmp_path: Path, mode: str) -> None:
    context = b'{"steps": {"a": {"output": {"rows": 3}}}}'
    res = run(tmp_path, mode, 'cat "$SCHEDULER_CONTEXT_FILE"; echo; pwd', context=context)
    assert res.exit_code == 0, res.output
    read, workdir = res.output.splitlines()
    assert read.encode() == context
    if mode == "bwrap":
        assert workdir == "/job"
    assert "SCHEDULER_CONTEXT_FILE" not in run(tmp_path, mode, "env").output
    [line] = run(tmp_path, mode, 'ls -l "$(pwd)/context.json"', context=b"{}").output.splitlines()
    assert line.startswith("-r--------"), line
