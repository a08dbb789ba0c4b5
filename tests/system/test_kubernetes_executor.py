"""`runworker --executor kubernetes` against a stand-in Kubernetes API on 127.0.0.1.

Real parts: the worker and reviewer processes, PostgreSQL, moto's S3 server holding the
executable, the official `kubernetes` client; the stand-in (tests/k8s_standin.py) runs each
Job's container command as a local process, so the pod really fetches the executable from its
presigned URL and really runs it.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import signal
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from tasks.models import Attempt, Run, Task
from tasks.transitions import claim
from tasks.transitions.run_actions import cancel_run
from tasks.worker.k8s_capacity import NamespaceCapacity
from tasks.worker.k8s_job import HASH_MISMATCH, HASH_MISMATCH_EXIT, Cluster
from tests.conftest import process_env, wait_for
from tests.factories import RunFactory, TaskFactory
from tests.k8s_standin import FakeJob, KubeStandIn
from tests.tasks.test_storage import bucket, s3_endpoint, s3_env  # noqa: F401

IMAGE = "registry.example/scheduler-payload:1"


@pytest.fixture
def cluster(tmp_path) -> Iterator[KubeStandIn]:
    (tmp_path / "pods").mkdir()
    standin = KubeStandIn(workdir=tmp_path / "pods").start()
    yield standin
    standin.stop()


@pytest.fixture
def k8s_env(cluster, s3_endpoint, tmp_path) -> dict[str, str]:  # noqa: F811
    return process_env(
        **s3_env(s3_endpoint),
        KUBECONFIG=str(cluster.kubeconfig(tmp_path / "kubeconfig")),
        SCHEDULER_K8S_NAMESPACE="jobs",
        SCHEDULER_K8S_IMAGE=IMAGE,
        SCHEDULER_K8S_POLL_SECONDS="0.2",
        SCHEDULER_DATA_DIR=str(tmp_path / "worker"),
    )


def executable_task(endpoint: str, script: str, **fields):
    content = script.encode()
    key = f"executables/{hashlib.sha256(content).hexdigest()}/job.sh"
    bucket(endpoint).put_object(Key=key, Body=content)
    run_fields = {k: fields.pop(k) for k in ("execute_at", "scheduled_at") if k in fields}
    task = TaskFactory(
        kind="executable", executable=key, payload=fields.pop("payload", {}), **fields
    )
    task.set_requests()
    task.save()
    return RunFactory(task=task, **task.requests, **run_fields)


def finished(run: Run) -> Run | None:
    run.refresh_from_db()
    return run if run.status in ("succeeded", "failed", "cancelled") else None


def jobs_of(cluster: KubeStandIn, run: Run) -> list[FakeJob]:
    return [
        j
        for j in cluster.history
        if j.body["metadata"]["labels"].get("scheduler/run-id") == str(run.id)
    ]


@pytest.mark.processes
def test_an_executable_runs_as_a_job(processes, cluster, k8s_env, s3_endpoint):  # noqa: F811
    ok = executable_task(
        s3_endpoint,
        '#!/bin/sh\necho "hello $1 from run $SCHEDULER_RUN_ID attempt $SCHEDULER_ATTEMPT"\n',
        payload={"args": ["pod"]},
        resources={"cpu": "500m", "memory": "64Mi"},
        timeout=30,
    )
    failing = executable_task(s3_endpoint, "#!/bin/sh\necho failing >&2\nexit 3\n", max_attempts=1)
    processes.start("runworker", "--executor", "kubernetes", "--concurrency", "2", env=k8s_env)

    for run in (ok, failing):
        wait_for(lambda r=run: finished(r), timeout=60, interval=0.3, details=processes.logs)

    assert ok.status == "succeeded", (ok.error, processes.logs())
    assert ok.exit_code == 0
    assert ok.output == f"hello pod from run {ok.id} attempt 1\n"
    assert failing.status == "failed" and failing.exit_code == 3
    assert failing.output == "failing\n"
    assert Attempt.objects.get(run=failing).outcome == "failed"
    [job] = jobs_of(cluster, ok)
    body = job.body
    assert body["metadata"]["name"] == f"sched-{ok.id}-1"
    assert body["metadata"]["namespace"] == "jobs"
    assert body["metadata"]["labels"]["scheduler/task-id"] == str(ok.task_id)
    assert body["spec"]["backoffLimit"] == 0
    assert body["spec"]["activeDeadlineSeconds"] == 30
    assert body["spec"]["ttlSecondsAfterFinished"] == 3600
    container = body["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == IMAGE
    assert container["resources"]["requests"] == {"cpu": "500m", "memory": "64Mi"}
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["SCHEDULER_RUN_ID"] == str(ok.id)
    assert env["SCHEDULER_EXECUTABLE_URL"].startswith(s3_endpoint)
    assert not any("SECRET" in name for name in env), "no storage credentials in the pod"


@pytest.mark.processes
def test_quota_admits_by_strict_priority(processes, cluster, k8s_env, s3_endpoint):  # noqa: F811
    cluster.quota_hard = {"requests.cpu": "2", "requests.memory": "8Gi"}
    script = "#!/bin/sh\nsleep 1.5\necho done $1\n"
    runs = {
        p: executable_task(
            s3_endpoint,
            script,
            payload={"args": [str(p)]},
            priority=p,
            resources={"cpu": "2", "memory": "64Mi"},
        )
        for p in (1, 5, 9)
    }
    too_big = executable_task(s3_endpoint, script, priority=9, resources={"cpu": "64"})
    processes.start("runworker", "--executor", "kubernetes", "--concurrency", "3", env=k8s_env)
    processes.start("runreviewer", env=k8s_env)  # says which runs no live worker can hold

    wait_for(lambda: jobs_of(cluster, runs[9]), timeout=60, details=processes.logs)
    statuses = wait_for(
        lambda: (
            {p: Run.objects.get(pk=r.pk).status for p, r in runs.items()}
            if all(Run.objects.get(pk=runs[p].pk).status == "waiting_for_resource" for p in (1, 5))
            else None
        ),
        timeout=10,
        details=processes.logs,
    )
    for run in runs.values():
        wait_for(lambda r=run: finished(r), timeout=60, interval=0.3, details=processes.logs)

    assert statuses == {1: "waiting_for_resource", 5: "waiting_for_resource", 9: "running"}
    assert all(r.status == "succeeded" for r in runs.values()), processes.logs()
    started = sorted(cluster.history, key=lambda j: j.started)
    priorities = [int(j.container["args"][0]) for j in started]
    assert priorities == [9, 5, 1]
    assert cluster.max_cpu_at_once() <= 2000
    too_big.refresh_from_db()
    assert too_big.status == "waiting_for_resource" and not jobs_of(cluster, too_big)
    assert too_big.wait_reason == "no live worker offers cpu=64"


@pytest.mark.processes
def test_cancel_and_timeout_delete_the_job(processes, cluster, k8s_env, s3_endpoint):  # noqa: F811
    sleeper = "#!/bin/sh\necho started\nsleep 60\n"
    cancelled = executable_task(s3_endpoint, sleeper, max_attempts=1)
    timed_out = executable_task(s3_endpoint, sleeper + "# timed\n", max_attempts=1, timeout=2)
    processes.start("runworker", "--executor", "kubernetes", "--concurrency", "2", env=k8s_env)
    wait_for(lambda: len(jobs_of(cluster, cancelled)) == 1, timeout=60, details=processes.logs)
    [job] = jobs_of(cluster, cancelled)
    wait_for(lambda: job.log.read_text() == "started\n", timeout=30)

    cancel_run(run=cancelled, now=datetime.now(UTC))
    asked = time.monotonic()
    wait_for(lambda: job.name not in cluster.jobs, timeout=5, details=processes.logs)

    assert time.monotonic() - asked < 5
    assert job.proc is not None and job.proc.poll() is not None, "the pod's process is killed"
    run = wait_for(lambda: finished(timed_out), timeout=30, details=processes.logs)
    assert run.status == "failed" and "timed out" in run.error, run.error
    assert Attempt.objects.get(run=run).outcome == "timed_out"
    [late] = jobs_of(cluster, timed_out)
    wait_for(lambda: late.name not in cluster.jobs, timeout=5)
    assert late.ended is not None and late.ended - late.started < 10


@pytest.mark.processes
def test_worker_killed_mid_run_never_overlaps_jobs(
    processes,
    cluster,
    k8s_env,
    s3_endpoint,  # noqa: F811
):
    env = k8s_env | {"REVIEWERS_RESCUE_AFTER_SECONDS": "3", "TASKS_HEARTBEAT_SECONDS": "0.5"}
    run = executable_task(s3_endpoint, "#!/bin/sh\nsleep 3\necho finished\n", max_attempts=3)
    first = processes.start("runworker", "--executor", "kubernetes", env=env)
    wait_for(lambda: jobs_of(cluster, run), timeout=60, details=processes.logs)
    time.sleep(0.5)  # mid-run
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    processes.start("runreviewer", env=env)
    processes.start("runworker", "--executor", "kubernetes", env=env)

    done = wait_for(lambda: finished(run), timeout=90, interval=0.3, details=processes.logs)

    assert done.status == "succeeded", (done.error, processes.logs())
    assert done.output == "finished\n"
    outcomes = list(
        Attempt.objects.filter(run=run).order_by("number").values_list("outcome", flat=True)
    )
    assert outcomes.count("succeeded") == 1, outcomes
    jobs = sorted(jobs_of(cluster, run), key=lambda j: j.started)
    assert len(jobs) >= 1
    for before, after in itertools.pairwise(jobs):
        assert before.ended is not None and before.ended <= after.started, "jobs overlapped"


@pytest.mark.processes
def test_a_pod_that_never_starts_fails_the_attempt(processes, cluster, k8s_env, s3_endpoint):  # noqa: F811
    env = k8s_env | {
        "SCHEDULER_K8S_IMAGE": "registry.example/unpullable:1",
        "SCHEDULER_K8S_START_DEADLINE_SECONDS": "2",
    }
    run = executable_task(s3_endpoint, "#!/bin/sh\necho never\n", max_attempts=1)
    processes.start("runworker", "--executor", "kubernetes", env=env)

    done = wait_for(lambda: finished(run), timeout=60, interval=0.3, details=processes.logs)

    assert done.status == "failed"
    assert done.error == "pod did not start: ImagePullBackOff", done.error
    [job] = jobs_of(cluster, run)
    assert job.name not in cluster.jobs, "the Job is deleted"


@pytest.mark.processes
def test_the_pod_refuses_an_executable_whose_bytes_changed(
    processes,
    cluster,
    k8s_env,
    s3_endpoint,  # noqa: F811
):
    run = executable_task(s3_endpoint, "#!/bin/sh\necho uploaded\n", max_attempts=1)
    bucket(s3_endpoint).put_object(Key=run.task.executable.name, Body=b"#!/bin/sh\necho swapped\n")
    processes.start("runworker", "--executor", "kubernetes", env=k8s_env)

    done = wait_for(lambda: finished(run), timeout=60, interval=0.3, details=processes.logs)

    assert done.status == "failed" and done.exit_code == HASH_MISMATCH_EXIT
    swapped = hashlib.sha256(b"#!/bin/sh\necho swapped\n").hexdigest()
    expected = run.task.executable.name.split("/")[1]
    assert done.error == f"{HASH_MISMATCH} {swapped}, not {expected}: not run", done.error
    assert "swapped" not in done.output.replace(swapped, ""), "the payload never ran"
    [job] = jobs_of(cluster, run)
    env = {e["name"]: e["value"] for e in job.container["env"]}
    assert env["SCHEDULER_EXECUTABLE_SHA256"] == expected


@pytest.mark.processes
def test_the_owner_cap_holds_for_jobs(processes, cluster, k8s_env, s3_endpoint):  # noqa: F811
    """With TASKS_OWNER_MAX_RUNNING=1, two due runs of one owner never run as Jobs at once."""
    first = executable_task(s3_endpoint, "#!/bin/sh\nsleep 1.5\necho first\n")
    second = executable_task(s3_endpoint, "#!/bin/sh\nsleep 1.5\necho second\n")
    Task.objects.filter(pk=second.task_id).update(owner=first.owner)
    Run.objects.filter(pk=second.pk).update(owner=first.owner)
    env = k8s_env | {"TASKS_OWNER_MAX_RUNNING": "1"}
    processes.start("runworker", "--executor", "kubernetes", "--concurrency", "2", env=env)

    for run in (first, second):
        wait_for(lambda r=run: finished(r), timeout=60, interval=0.3, details=processes.logs)

    assert first.status == second.status == "succeeded", processes.logs()
    jobs = sorted(jobs_of(cluster, first) + jobs_of(cluster, second), key=lambda j: j.started)
    assert len(jobs) == 2
    assert jobs[0].ended is not None and jobs[0].ended <= jobs[1].started, "jobs overlapped"


@pytest.mark.django_db
def test_the_namespace_offers_its_quota_less_the_runs_it_has_not_seen_counted(
    cluster, tmp_path, monkeypatch
):
    """The quota's hard is the worker's total; its free is hard - used less the requests of the
    runs it holds whose pod the quota does not count yet. The claim is the standard one, so a
    missed occurrence is skipped, not claimed."""
    monkeypatch.setenv("KUBECONFIG", str(cluster.kubeconfig(tmp_path / "kubeconfig")))
    cluster.quota_hard = {"requests.cpu": "2", "requests.memory": "1Gi"}
    now = datetime.now(UTC)
    recurring = TaskFactory(
        schedule={"type": "interval", "every": 60, "misfire": "skip"}, schedule_type="interval"
    )
    missed = RunFactory(
        task=recurring,
        execute_at=now - timedelta(minutes=5),
        missed_after=now - timedelta(minutes=4),
    )
    due = [
        RunFactory(task=TaskFactory(), execute_at=now - timedelta(seconds=3 - n), cpu_millis=1000)
        for n in range(3)
    ]
    namespace = NamespaceCapacity(cluster_factory=Cluster)
    namespace.refresh()
    offer = namespace.offer([])

    claimed = claim.claim_runs(
        worker="k8s-test", limit=4, prefetch_seconds=0.5, owner_cap=0, capacity=offer
    )

    assert offer == claim.Capacity(2000, 2**30, 2000, 2**30)
    assert [run.id for run in claimed] == [due[0].id, due[1].id]
    assert claimed.held_back
    missed.refresh_from_db()
    assert missed.status == "skipped" and "missed" in missed.error
    assert Run.objects.get(pk=due[2].pk).status == "waiting_for_resource"
    assert namespace.offer(claimed).cpu_free == 0  # neither pod counted yet
    namespace.counted(claimed[0].id)
    assert namespace.offer(claimed).cpu_free == 1000  # the quota's `used` counts that one
    assert namespace.offer(claimed[1:]).cpu_free == 1000  # the first one's result is recorded


@pytest.mark.processes
def test_a_job_without_output_or_status_change_is_a_zombie(
    processes,
    cluster,
    k8s_env,
    s3_endpoint,  # noqa: F811
):
    """No CPU figures for a pod here: a Job that writes nothing and whose status does not change
    for TASKS_ZOMBIE_AFTER_SECONDS is flagged; one that keeps writing is not."""
    idle = executable_task(
        s3_endpoint, "#!/bin/sh\necho started\nexec sleep 30\n", on_zombie="cancel", max_attempts=1
    )
    talks = "#!/bin/sh\nfor i in 1 2 3 4 5 6 7 8; do echo same; sleep 0.5; done\n"
    chatty = executable_task(s3_endpoint, talks, max_attempts=1)
    env = k8s_env | {"TASKS_ZOMBIE_AFTER_SECONDS": "2", "TASKS_HEARTBEAT_SECONDS": "0.5"}
    processes.start("runworker", "--executor", "kubernetes", "--concurrency", "2", env=env)

    flagged = wait_for(lambda: finished(idle), timeout=60, interval=0.2, details=processes.logs)
    quiet = wait_for(lambda: finished(chatty), timeout=60, interval=0.2, details=processes.logs)

    assert flagged.status == "cancelled", (flagged.error, processes.logs())
    assert flagged.zombie_since is not None
    assert flagged.error.startswith(
        "cancelled as a zombie: no log output and no Job status change for "
    ), flagged.error
    assert flagged.finished_at - flagged.started_at < timedelta(seconds=15)
    [job] = jobs_of(cluster, idle)
    assert job.name not in cluster.jobs and job.proc.poll() is not None, "the Job is deleted"
    assert quiet.status == "succeeded" and quiet.zombie_since is None, processes.logs()
    assert quiet.output == "same\n" * 8
