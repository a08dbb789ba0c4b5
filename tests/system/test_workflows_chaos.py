"""Chaos for workflows: 50 runs of a 5-step workflow (a diamond plus a tail) started while a worker,
the scheduler or the reviewer is SIGKILLed every 2 s and restarted. Every workflow run ends
`succeeded`, every step has exactly one run per workflow run (and one recorded success), no
step's attempt started before its upstream steps' runs had ended, by the recorded attempt times,
and each workflow run queued exactly one `workflow_succeeded`, which a real webhook receiver on
127.0.0.1 got (at least once: a killed deliverer may send again). Run with `pytest -m chaos`."""

from __future__ import annotations

import itertools
import signal
import subprocess
import time
from collections.abc import Iterator

import pytest
from django.conf import settings

import tests.handlers  # noqa: F401 (the API validates step bodies against these handlers)
from notifications.models import Notification
from tasks.models import Attempt, Process, Run, WorkflowRun, WorkflowStep
from tests.conftest import client_for, process_env, wait_for
from tests.factories import UserFactory
from tests.notifications.conftest import serving, webhook_channel

pytestmark = [pytest.mark.chaos, pytest.mark.processes]

RUNS = 50
START_EVERY = 0.5  # seconds between workflow runs started: the work lasts through a dozen kills
KILL_EVERY = 2.0
TIMING = {
    "TASKS_HEARTBEAT_SECONDS": "0.5",
    "REVIEWERS_RESCUE_AFTER_SECONDS": "2.0",
    "REVIEWERS_INTERVAL_SECONDS": "0.5",
    "TASKS_START_SLA_SECONDS": "600",
    # A deliverer killed mid-send leaves its claim leased: back within seconds, not minutes.
    "SCHEDULER_OUTBOUND_TIMEOUT_SECONDS": "0.5",
    "NOTIFICATIONS_LEASE_SECONDS": "6",
}


def step(name: str) -> dict:
    return {
        "kind": "handler",
        "payload": {"name": "step", "args": {"name": name, "sleep": 0.05}},
        "max_attempts": 20,
        "retry_backoff": {"base": 0.1, "cap": 0.1},
    }


STEPS = [
    {"id": "a", "task": step("a")},
    {"id": "b", "after": ["a"], "task": step("b")},
    {"id": "c", "after": ["a"], "task": step("c")},
    {"id": "d", "after": ["b", "c"], "task": step("d")},
    {"id": "e", "after": ["d"], "task": step("e")},
]
AFTER = {s["id"]: s.get("after", []) for s in STEPS}


def next_up(victims: Iterator[str], running: dict[str, subprocess.Popen]) -> str | None:
    """The next role in turn whose process is up (it registered its Process row), or None: a
    process killed while it still boots never works at all, and on a loaded machine booting
    can take longer than a role's turn comes round."""
    for _ in range(len(running)):
        victim = next(victims)
        if Process.objects.filter(pid=running[victim].pid, stopped_at__isnull=True).exists():
            return victim
    return None


def test_killed_roles_leave_every_workflow_run_succeeded_each_step_once_in_order(processes):
    with serving() as receiver:
        delivered = run_the_chaos(processes, receiver)
    assert delivered


def run_the_chaos(processes, receiver) -> bool:
    user = UserFactory()
    api = client_for(user)
    channel = webhook_channel(receiver, user)
    notify = [{"channel": str(channel.id), "events": ["workflow_succeeded"]}]
    body = {"name": "chaos", "steps": STEPS, "notify": notify}
    created = api.post("/api/v1/workflows", body, format="json")
    assert created.status_code == 201, created.content
    workflow_id = created.json()["id"]
    env = process_env(
        SCHEDULER_HANDLER_MODULES="tests.handlers",
        SCHEDULER_OUTBOUND_ALLOW="127.0.0.1",
        SCHEDULER_ENCRYPTION_KEY=settings.SCHEDULER_ENCRYPTION_KEY,
        **TIMING,
    )
    roles = {
        "worker-1": ("runworker", "--concurrency", "2"),
        "worker-2": ("runworker", "--concurrency", "2"),
        "scheduler": ("runscheduler",),
        "reviewer": ("runreviewer",),
    }
    running = {name: processes.start(*args, env=env) for name, args in roles.items()}
    victims = itertools.cycle(["worker-1", "scheduler", "worker-2", "reviewer"])
    kills: list[str] = []
    started: list[str] = []
    begun = last_start = last_kill = time.monotonic()
    deadline = begun + 240

    def unfinished() -> int:
        return WorkflowRun.objects.filter(workflow_id=workflow_id, status="running").count()

    while len(started) < RUNS or unfinished():
        assert time.monotonic() < deadline, "workflow runs did not all end:\n" + processes.logs()
        now = time.monotonic()
        if len(started) < RUNS and now - last_start >= START_EVERY:
            answer = api.post(f"/api/v1/workflows/{workflow_id}/run")
            assert answer.status_code == 201, answer.content
            started.append(answer.json()["id"])
            last_start = now
        victim = next_up(victims, running) if now - last_kill >= KILL_EVERY else None
        if victim is not None:
            running[victim].send_signal(signal.SIGKILL)
            running[victim].wait()
            kills.append(victim)
            running[victim] = processes.start(*roles[victim], env=env)
            last_kill = now
        time.sleep(0.05)

    assert len(kills) >= 8, f"only {kills} killed while workflow runs were in flight"
    assert set(kills) == set(roles), kills
    statuses = dict(WorkflowRun.objects.filter(pk__in=started).values_list("id", "status"))
    assert len(statuses) == RUNS
    assert {str(k): v for k, v in statuses.items() if v != "succeeded"} == {}

    # Exactly one run per step per workflow run: 5 step rows, each with its own run, and no
    # other run of the steps' tasks.
    rows = list(WorkflowStep.objects.filter(workflow_run_id__in=started))
    assert len(rows) == RUNS * len(STEPS)
    assert all(row.run_id is not None for row in rows)
    assert len({row.run_id for row in rows}) == len(rows)
    step_runs = Run.objects.filter(workflow_step__workflow_run_id__in=started)
    assert Run.objects.filter(task__in=step_runs.values("task_id")).count() == len(rows)
    assert set(step_runs.values_list("status", flat=True)) == {"succeeded"}

    # One recorded success per step run; no attempt of a step started before every attempt of
    # its upstream steps' runs had finished.
    attempts: dict[object, list[Attempt]] = {}
    for attempt in Attempt.objects.filter(run_id__in=[row.run_id for row in rows]):
        attempts.setdefault(attempt.run_id, []).append(attempt)
    by_step = {(row.workflow_run_id, row.step_id): row.run_id for row in rows}
    early = []
    for (workflow_run_id, step_id), run_id in by_step.items():
        mine = attempts.get(run_id, [])
        assert [a.outcome for a in mine].count("succeeded") == 1, (step_id, mine)
        first_start = min(a.started_at for a in mine if a.started_at is not None)
        for upstream in AFTER[step_id]:
            theirs = attempts[by_step[(workflow_run_id, upstream)]]
            assert all(a.finished_at is not None for a in theirs)
            last_end = max(a.finished_at for a in theirs)
            if first_start < last_end:
                early.append((workflow_run_id, step_id, upstream, first_start, last_end))
    assert early == []
    rescued = sum(a.outcome == "rescued" for runs in attempts.values() for a in runs)
    print(f"kills={len(kills)} rescued_attempts={rescued} took={time.monotonic() - begun:.1f}s")

    # One notification queued per workflow run, with its end; every one delivered.
    rows = Notification.objects.filter(workflow_run_id__in=started)
    assert sorted(str(r) for r in rows.values_list("workflow_run_id", flat=True)) == sorted(started)
    assert set(rows.values_list("event", flat=True)) == {"workflow_succeeded"}
    wait_for(
        lambda: not rows.exclude(status="sent").exists(),
        timeout=60,
        interval=0.2,
        details=processes.logs,
    )
    received = {d["body"]["id"] for d in receiver.accepted}
    assert received == {str(pk) for pk in rows.values_list("id", flat=True)}
    by_run = {d["body"]["workflow_run"]["id"] for d in receiver.accepted}
    assert by_run == set(started)
    return True
