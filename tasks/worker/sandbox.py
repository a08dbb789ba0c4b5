"""Run an uploaded executable in a sandbox (pure module: no Django imports).

The supervisor of each run is tasks/worker/supervisor.py, started as a script.

Layout of one run::

    worker thread --Popen(new session)--> supervisor (supervisor.py as a script, worker's uid)
        --fork + rlimits (+ drop to nobody)--> payload  |  bwrap -> payload (own pid namespace)

The supervisor is a PR_SET_CHILD_SUBREAPER, so anything the payload starts -- even a daemon
that double-forks and calls setsid() -- is re-parented to it instead of to init. When the
payload exits, or on SIGTERM from the worker (timeout/cancel), or when the worker thread dies
(PR_SET_PDEATHSIG), the supervisor kills every descendant and reaps it before it exits itself,
so ``run_executable`` returns only once the whole tree is gone.

Modes:

* ``bwrap`` (bubblewrap): read-only system dirs, tmpfs /tmp, no network, new pid namespace,
  empty environment, unprivileged uid. When the worker is root and user namespaces work,
  bwrap itself runs as ``nobody`` so RLIMIT_NPROC is really enforced (the kernel exempts real
  uid 0 from it entirely).
* ``rlimit``: same rlimits, clean environment, PR_SET_NO_NEW_PRIVS and, when the worker is
  root, uid/gid ``nobody``; no filesystem/network isolation.

Limits that cannot be guaranteed:

* RLIMIT_NPROC counts all processes of a real uid, so it is only set when the payload runs as
  ``nobody`` (shared by concurrent runs). When the worker is not root, an rlimit-only payload
  runs as the worker's uid: no process limit, and it could signal the supervisor itself.
  Payloads sharing uid ``nobody`` (concurrent rlimit-mode runs, or bwrap-as-nobody runs)
  share that budget and could signal each other in rlimit mode (``kill -9 -1``).
* bwrap as root *without* user namespaces keeps the payload at uid 0 (all capabilities
  dropped, no RLIMIT_NPROC); the pid namespace still contains it until the timeout.
* RLIMIT_FSIZE bounds a single file, not the total written to the work dir; RLIMIT_AS and
  RLIMIT_CPU are per process.
* If the worker is SIGKILLed, the supervisor gets SIGTERM (pdeathsig, tied to the *thread*
  that called us), kills the tree and removes the work dir; if the supervisor itself is
  SIGKILLed in rlimit mode, re-parented daemons can survive (bwrap mode: --die-with-parent).
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from tasks.worker import supervisor
from tasks.worker.supervisor import GRACE_SECONDS, remove_tree
from tasks.worker.zombie_tracker import Activity

NOBODY = 65534
# A workflow step's context ({"steps": {id: {"output"}}}), beside the payload in its workdir.
CONTEXT_FILE = "context.json"
_SIGNAL_HINTS = {
    signal.SIGXFSZ: "file size limit exceeded",
    signal.SIGXCPU: "CPU time limit exceeded",
}
_ETC_FILES = (
    "alternatives",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "passwd",
    "group",
    "nsswitch.conf",
    "localtime",
)
_NET_ETC_FILES = ("resolv.conf", "hosts", "host.conf", "gai.conf", "ssl", "ca-certificates")


@dataclass(frozen=True)
class Limits:
    cpu_seconds: int = 60
    memory_bytes: int = 512 * 2**20
    file_size_bytes: int = 64 * 2**20
    processes: int = 64
    open_files: int = 256
    output_bytes: int = 64 * 1024


@dataclass(frozen=True)
class ExecResult:
    exit_code: int | None  # None when killed by us (timeout/cancel)
    output: str
    timed_out: bool
    cancelled: bool
    error: str
    duration: float


class SandboxUnavailable(Exception):
    pass


BWRAP_MISSING = "bubblewrap (bwrap) is not installed"
# Working bwrap configurations by (path, inode, mtime, euid): see _bwrap_variant.
_WORKING: dict[tuple[str, int, int, int], tuple[bool, tuple[str, ...]]] = {}


def _bwrap_args(
    workdir: str, env: Mapping[str, str], network: bool, extra: Sequence[str]
) -> list[str]:
    """bwrap options (everything but the command) for a sandbox with `workdir` at /job."""
    args = ["--unshare-all", "--unshare-pid", "--die-with-parent", "--new-session"]
    if network:
        args.append("--share-net")
    args += ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64"):
        if os.path.islink(top):  # merged-/usr systems: /bin -> usr/bin
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for name in _ETC_FILES + (_NET_ETC_FILES if network else ()):
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    args += ["--bind", workdir, "/job", "--chdir", "/job", "--clearenv", *extra]
    for key, value in env.items():
        args += ["--setenv", key, value]
    return args


def _bwrap_variant() -> tuple[tuple[bool, tuple[str, ...]] | None, str]:
    """Find a bwrap configuration that works here now: ((run bwrap as nobody, extra args), why).

    Looked up afresh on every call (a PATH lookup): bubblewrap installed while the worker runs
    is found without a restart. Only a working configuration is remembered, per binary (path,
    inode, mtime), so a worker does not start a trial sandbox at every heartbeat; a failing one
    is tried again each time, so that enabling user namespaces later is noticed too."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return None, BWRAP_MISSING
    try:
        info = os.stat(bwrap)
    except OSError as exc:  # removed since the lookup
        return None, f"bwrap cannot be read ({exc})"
    return _probe_bwrap(bwrap, info.st_ino, info.st_mtime_ns, os.geteuid())


def _probe_bwrap(
    bwrap: str, inode: int, mtime_ns: int, euid: int
) -> tuple[tuple[bool, tuple[str, ...]] | None, str]:
    key = (bwrap, inode, mtime_ns, euid)
    if key in _WORKING:
        return _WORKING[key], ""
    root = euid == 0
    ids: tuple[str, ...] = ("--uid", str(NOBODY), "--gid", str(NOBODY))
    candidates: list[tuple[bool, tuple[str, ...]]] = [(True, ids)] if root else []
    # Without user namespaces only root can run bwrap, and the payload then stays uid 0 in it.
    candidates += [(False, ids), (False, ("--cap-drop", "ALL"))] if root else [(False, ids)]
    reasons = []
    for as_nobody, extra in candidates:
        workdir, nobody = _make_workdir(as_nobody), NOBODY if as_nobody else None
        try:
            proc = subprocess.run(
                [bwrap, *_bwrap_args(workdir, {}, False, extra), "/bin/true"],
                capture_output=True,
                text=True,
                timeout=20,
                env={},
                user=nobody,
                group=nobody,
                extra_groups=[] if as_nobody else None,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            reasons.append(str(exc))
            continue
        finally:
            remove_tree(workdir)
        if proc.returncode == 0:
            _WORKING[key] = (as_nobody, extra)
            return (as_nobody, extra), ""
        reasons.append(proc.stderr.strip() or f"exit code {proc.returncode}")
    return None, f"bwrap is installed but cannot run here ({'; '.join(reasons)})"


def sandbox_mode(*, allow_rlimit_only: bool) -> str:
    """'bwrap' if bubblewrap works here, else 'rlimit' if allowed, else SandboxUnavailable."""
    mode, reason = capability(allow_rlimit_only=allow_rlimit_only)
    if mode:
        return mode
    raise SandboxUnavailable(reason)


def capability(*, allow_rlimit_only: bool) -> tuple[str, str]:
    """(mode, "") when executables can run here now, ("", why not) when they cannot. A worker
    asks at every heartbeat and reports the answer in its process row."""
    variant, reason = _bwrap_variant()
    if variant is not None:
        return "bwrap", ""
    if allow_rlimit_only:
        return "rlimit", ""
    return "", (
        f"{reason}; install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap) or set "
        "SCHEDULER_SANDBOX_ALLOW_RLIMIT_ONLY=true to accept rlimit-only runs"
    )


def check_interpreter(path: str) -> str:
    """Why the file at `path` cannot be exec'd directly ("" when it can): it must start with a
    shebang line (`#!/usr/bin/env python3`) or be an ELF binary. Without this check bwrap's
    execvp() would fall back to running the file with /bin/sh, whatever language it is in."""
    with open(path, "rb") as f:
        return interpreter_refusal(f.read(4))


def interpreter_refusal(head: bytes) -> str:
    """check_interpreter for a file's first four bytes `head`."""
    if head.startswith(b"#!") or head == b"\x7fELF":
        return ""
    return (
        "no shebang: the file starts with neither '#!' (e.g. '#!/usr/bin/env python3' naming "
        "its interpreter) nor an ELF header, so it cannot be executed"
    )


def _make_workdir(chown_nobody: bool) -> str:
    workdir = tempfile.mkdtemp(prefix="sched-run-")
    if chown_nobody:
        os.chown(workdir, NOBODY, NOBODY)
    return workdir


def run_executable(
    path: str,
    *,
    args: Sequence[str],
    env: Mapping[str, str],
    timeout: float | None,
    limits: Limits,
    cancel: threading.Event | None = None,
    mode: str,
    network: bool = False,
    activity: Activity | None = None,
    context: bytes | None = None,
) -> ExecResult:
    """Run `path` with `args` in the sandbox `mode` and return once every process is gone.
    The file is exec'd directly: its shebang line names the interpreter, and a file with
    neither a shebang nor an ELF header fails without running. `activity` learns the
    supervisor's pid and when output last came. `context` (a workflow step's upstream
    outputs, JSON) is written as CONTEXT_FILE in the working directory, readable by the
    payload alone, and SCHEDULER_CONTEXT_FILE names it as the payload sees it (/job/... in
    bubblewrap): a file, not a variable, since a join's outputs outgrow what the environment
    holds."""
    if mode not in ("bwrap", "rlimit"):
        raise ValueError(f"unknown sandbox mode {mode!r}")
    variant, why = _bwrap_variant() if mode == "bwrap" else (None, "")
    if mode == "bwrap" and variant is None:
        raise SandboxUnavailable(why)
    root = os.geteuid() == 0
    drop = root and (mode == "rlimit" or (variant is not None and variant[0]))
    child_env = {**env, "PATH": "/usr/bin:/bin"}
    started = time.monotonic()
    refused = check_interpreter(path)
    if refused:
        return ExecResult(None, "", False, False, refused, time.monotonic() - started)
    workdir = _make_workdir(drop)
    try:
        payload = os.path.join(workdir, "payload")
        shutil.copyfile(path, payload)
        os.chmod(payload, 0o700)
        if drop:
            os.chown(payload, NOBODY, NOBODY)
        if context is not None:
            written = os.path.join(workdir, CONTEXT_FILE)
            with open(written, "wb") as out:
                out.write(context)
            os.chmod(written, 0o400)
            if drop:
                os.chown(written, NOBODY, NOBODY)
            seen = f"/job/{CONTEXT_FILE}" if variant is not None else written
            child_env = {**child_env, "SCHEDULER_CONTEXT_FILE": seen}
        config: dict[str, object] = {
            "limits": asdict(limits),
            "uid": NOBODY if drop else None,
            "rlimit_mode": mode == "rlimit",
            "env": child_env,
            "argv": [payload, *args],
            "parent": os.getpid(),
        }
        if variant is not None:
            options = _bwrap_args(workdir, child_env, network, variant[1])
            config["bwrap"] = [shutil.which("bwrap") or "bwrap", options, "/job/payload", *args]
        return _supervise_run(config, workdir, timeout, limits, cancel, started, activity)
    finally:
        remove_tree(workdir)


def _supervise_run(
    config: dict[str, object],
    workdir: str,
    timeout: float | None,
    limits: Limits,
    cancel: threading.Event | None,
    started: float,
    activity: Activity | None = None,
) -> ExecResult:
    proc = subprocess.Popen(
        [sys.executable, "-I", "-S", os.path.abspath(supervisor.__file__)],
        cwd=workdir,
        env={},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        close_fds=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    # Config (env may hold secrets) goes over a pipe, never on a world-readable command line.
    proc.stdin.write(json.dumps(config).encode())
    proc.stdin.close()
    if activity is not None:
        activity.output_at, activity.pid = time.monotonic(), proc.pid
    chunks: list[bytes] = []
    kept = discarded = 0
    deadline = None if timeout is None else started + timeout
    killed_at: float | None = None
    timed_out = cancelled = eof = False
    exited_at: float | None = None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while True:
            if not eof:
                for _key, _ in sel.select(0.05):
                    data = os.read(proc.stdout.fileno(), 65536)
                    if not data:
                        eof = True
                        break
                    if activity is not None:
                        activity.output_at = time.monotonic()
                    take = max(0, min(len(data), limits.output_bytes - kept))
                    chunks.append(data[:take])
                    kept, discarded = kept + take, discarded + len(data) - take
            else:
                time.sleep(0.05)
            now = time.monotonic()
            if proc.poll() is not None:
                exited_at = exited_at or now
                # A process outside the tree (impossible unless a kill failed) may hold the
                # pipe open: stop reading soon after the supervisor is gone.
                if eof or now - exited_at > 0.5:
                    break
            elif killed_at is None:
                timed_out = deadline is not None and now >= deadline
                cancelled = not timed_out and cancel is not None and cancel.is_set()
                if timed_out or cancelled:
                    killed_at = now
                    _killpg(proc.pid, signal.SIGTERM)  # supervisor escalates to SIGKILL itself
            elif now - killed_at > GRACE_SECONDS + 5:
                _killpg(proc.pid, signal.SIGKILL)  # the supervisor is stuck; last resort
    proc.stdout.close()
    _killpg(proc.pid, signal.SIGKILL)  # anything left in the original process group
    code = proc.wait()
    output = b"".join(chunks)
    if discarded:
        note = f"\n[output truncated: {discarded} more bytes discarded]"
        output = output[: max(0, limits.output_bytes - len(note))] + note.encode()
    if timed_out:
        exit_code, error = None, f"timed out after {timeout:g}s"
    elif cancelled:
        exit_code, error = None, "cancelled"
    else:
        exit_code, error = code, _describe_exit(code)
    text, duration = output.decode("utf-8", errors="replace"), time.monotonic() - started
    return ExecResult(exit_code, text, timed_out, cancelled, error, duration)


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _describe_exit(code: int) -> str:
    if code == 0:
        return ""
    if code < 0:  # the supervisor itself died from a signal
        code = 128 - code
    if 128 < code < 128 + signal.NSIG:
        with contextlib.suppress(ValueError):
            sig = signal.Signals(code - 128)
            hint = _SIGNAL_HINTS.get(sig)
            return f"exit code {code}: killed by signal {sig.value} ({sig.name}" + (
                f": {hint})" if hint else ")"
            )
    return f"exit code {code}"
