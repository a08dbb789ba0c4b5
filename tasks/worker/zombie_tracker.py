"""Zombie runs: an executable whose processes used no CPU time and wrote no output for
TASKS_ZOMBIE_AFTER_SECONDS, flagged to their owner (docs/api.md, Zombie runs). A Kubernetes
Job's CPU is not visible here (the pod's metrics are not read), so a Job is a zombie when it
wrote no log output and its status did not change for that long. Pure code: the sandbox (or the
Job's follower, tasks/worker/k8s_executor.py) records activity, the worker's watch thread calls
`Tracker.check` once per heartbeat and writes what changed (tasks/transitions/zombie.py).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from uuid import UUID

RunKey = tuple[UUID, int]  # (run id, attempt)


@dataclass
class Activity:
    """One running executable as the sandbox reports it (written by the executor thread, read by
    the watch thread; single attribute writes, so no lock)."""

    pid: int | None = None  # the sandbox's supervisor: the root of the payload's process tree
    # Last output (monotonic); for a Job also its last status change.
    output_at: float = field(default_factory=time.monotonic)
    job: str | None = None  # the Kubernetes Job running it, once made: no process tree here

    @property
    def quiet_means(self) -> str:
        """What "quiet" was, in words for logs and errors."""
        if self.job is not None:
            return "no log output and no Job status change"
        return "no CPU time and no output"


def tree_cpu_ticks(roots: Iterable[int]) -> dict[int, int]:
    """CPU clock ticks used so far by the processes under each root, those already reaped
    included (they are added to their parent's cutime/cstime). The root's own time is left out:
    it is the sandbox's supervisor, which polls. One pass over /proc for all roots."""
    wanted = set(roots)
    if not wanted:
        return {}
    children: dict[int, list[int]] = {}
    ticks: dict[int, tuple[int, int]] = {}  # pid -> (own utime+stime, reaped children's)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2 :].split()  # the command name may hold spaces
        pid = int(entry)
        children.setdefault(int(fields[1]), []).append(pid)
        # utime, stime, cutime, cstime: fields 14-17 of proc(5), 11-14 after the name.
        ticks[pid] = (int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14]))
    found = {}
    for root in wanted:
        if root not in ticks:
            continue  # gone: the run is ending
        total, todo = ticks[root][1], list(children.get(root, []))
        while todo:
            pid = todo.pop()
            own, reaped = ticks.get(pid, (0, 0))
            total += own + reaped
            todo += children.get(pid, [])
        found[root] = total
    return found


@dataclass
class _Seen:
    ticks: int
    active_at: float
    flagged: bool = False


class Tracker:
    """Which running executables went quiet (no CPU, no output; for a Job: no output, no status
    change) for `after` seconds, and which of those stirred again; each change is reported
    once."""

    def __init__(self, after: float) -> None:
        self.after = after
        self.seen: dict[RunKey, _Seen] = {}

    def check(
        self, running: Mapping[RunKey, Activity], *, now: float | None = None
    ) -> tuple[list[tuple[RunKey, float]], list[RunKey]]:
        """(runs newly quiet for `after` seconds, with how long), (flagged runs active again)."""
        now = time.monotonic() if now is None else now
        roots = {key: a.pid for key, a in running.items() if a.pid is not None}
        jobs = {key for key, a in running.items() if a.pid is None and a.job is not None}
        ticks = tree_cpu_ticks(roots.values())
        quiet: list[tuple[RunKey, float]] = []
        stirred: list[RunKey] = []
        for key in list(self.seen):
            if key not in roots and key not in jobs:
                del self.seen[key]  # finished
        idle_for: dict[RunKey, float] = {}
        for key, pid in roots.items():
            used = ticks.get(pid)
            if used is None:
                continue
            seen = self.seen.get(key)
            if seen is None:
                seen = self.seen[key] = _Seen(used, running[key].output_at)
            elif used != seen.ticks:
                seen.ticks, seen.active_at = used, now
            idle_for[key] = now - max(seen.active_at, running[key].output_at)
        for key in jobs:  # the follower moves output_at on each output or status change
            self.seen.setdefault(key, _Seen(0, running[key].output_at))
            idle_for[key] = now - running[key].output_at
        for key, idle in idle_for.items():
            seen = self.seen[key]
            if idle >= self.after and not seen.flagged:
                seen.flagged = True
                quiet.append((key, idle))
            elif idle < self.after and seen.flagged:
                seen.flagged = False
                stirred.append(key)
        return quiet, stirred

    def undo(self, quiet: list[tuple[RunKey, float]], stirred: list[RunKey]) -> None:
        """Forget what `check` just reported (it could not be written), to report it again."""
        for key, _ in quiet:
            if key in self.seen:
                self.seen[key].flagged = False
        for key in stirred:
            if key in self.seen:
                self.seen[key].flagged = True
