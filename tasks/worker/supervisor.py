"""The sandbox's supervisor: run as a script, `python -I -S supervisor.py`, by tasks.worker.sandbox.

Isolated mode (-I -S) cannot import the project, so this module imports the standard library
only; the sandbox imports GRACE_SECONDS and remove_tree from it. Its config arrives as JSON on
stdin. It becomes a child subreaper, forks the payload (rlimits, dropped uid, or bwrap), reaps
everything the payload starts, and on SIGTERM (timeout, cancel, the worker gone) kills and reaps
the whole tree before it exits; docs of the layout and the limits: tasks/worker/sandbox.py.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import shutil
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

GRACE_SECONDS = 1.0
_PR_SET_PDEATHSIG, _PR_SET_NO_NEW_PRIVS, _PR_SET_CHILD_SUBREAPER = 1, 38, 36


def remove_tree(path: str) -> None:
    def fix_and_retry(func: Callable[[str], object], p: str, _exc: object) -> None:
        # A payload may chmod 000 its own files/dirs; the owner (or root) can undo that.
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(p), 0o700)
            os.chmod(p, 0o700)
            func(p)

    shutil.rmtree(path, onerror=fix_and_retry)


class _Terminate(Exception):
    pass


def _descendants(root_pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])  # comm may contain spaces
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root_pid]
    while todo:
        kids = children.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def _signal_all(sig: int) -> bool:
    pids = _descendants(os.getpid())
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    return bool(pids)


def _exec_child(config: dict[str, Any]) -> None:
    try:
        for sig in (signal.SIGTERM, signal.SIGPIPE, signal.SIGXFSZ):  # Python ignores the last two
            signal.signal(sig, signal.SIG_DFL)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        lim = config["limits"]
        for res, value in (
            (resource.RLIMIT_CPU, lim["cpu_seconds"]),
            (resource.RLIMIT_AS, lim["memory_bytes"]),
            (resource.RLIMIT_FSIZE, lim["file_size_bytes"]),
            (resource.RLIMIT_NOFILE, lim["open_files"]),
            (resource.RLIMIT_CORE, 0),
        ):
            hard = resource.getrlimit(res)[1]
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            # CPU: SIGXCPU at the soft limit, SIGKILL one second later.
            resource.setrlimit(res, (value, value + 1 if res == resource.RLIMIT_CPU else value))
        libc = ctypes.CDLL(None, use_errno=True)
        if config["uid"] is not None:
            resource.setrlimit(resource.RLIMIT_NPROC, (lim["processes"], lim["processes"]))
            os.setgroups([])
            os.setgid(config["uid"])
            os.setuid(config["uid"])
        if "bwrap" in config:
            bwrap, options, *command = config["bwrap"]
            # Options (with --setenv values) go through a memfd so `ps` cannot show them.
            fd = os.memfd_create("bwrap-args", 0)
            os.write(fd, b"".join(o.encode() + b"\0" for o in options))
            os.lseek(fd, 0, os.SEEK_SET)
            os.set_inheritable(fd, True)
            os.execve(bwrap, [bwrap, "--args", str(fd), *command], {})
        if config["rlimit_mode"]:
            libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)  # no setuid-binary escalation
        os.execve(config["argv"][0], config["argv"], config["env"])
    except BaseException as exc:
        os.write(2, f"sandbox: cannot start payload: {exc}\n".encode())
    os._exit(127)


def _supervise() -> int:
    config = json.loads(sys.stdin.buffer.read())
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)

    def on_term(_sig: int, _frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise _Terminate

    signal.signal(signal.SIGTERM, on_term)
    status = 1
    try:
        if os.getppid() != config["parent"]:  # the worker died before PDEATHSIG was armed
            raise _Terminate
        pid = os.fork()
        if pid == 0:
            _exec_child(config)
        while True:
            reaped, st = os.waitpid(-1, 0)  # also reaps re-parented orphans
            if reaped == pid:
                status = os.waitstatus_to_exitcode(st)
                break
    except _Terminate:
        deadline = time.monotonic() + GRACE_SECONDS
        while _signal_all(signal.SIGTERM) and time.monotonic() < deadline:
            time.sleep(0.05)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    deadline = time.monotonic() + 30  # bounded: a process stuck in D state cannot be reaped
    while _signal_all(signal.SIGKILL) and time.monotonic() < deadline:
        time.sleep(0.01)  # leftover daemons, fork bombs, the pid namespace
    if os.getppid() != config["parent"] and "sched-run-" in os.getcwd():
        remove_tree(os.getcwd())  # the worker is gone and cannot clean up after us
    return 128 - status if status < 0 else status


if __name__ == "__main__":
    sys.exit(_supervise())
