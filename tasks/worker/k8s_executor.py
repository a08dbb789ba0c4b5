"""`runworker --executor kubernetes`: an executable run is one batch/v1 Job, polled to its end.

Everything else (claiming, the fenced finish, retries, notifications, heartbeats) is the worker's
as for local runs; only the executable's execution differs. Handlers and HTTP calls run in the
worker as before. Polling, not a watch: one read per Job per SCHEDULER_K8S_POLL_SECONDS.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Protocol
from uuid import UUID

from django.conf import settings
from django.core.files.storage import default_storage

from tasks.models import Task
from tasks.storage import sha256_of
from tasks.transitions.claim import ClaimedRun
from tasks.worker import executors
from tasks.worker.executors import ExecutionResult, cap_output
from tasks.worker.k8s_job import (
    HASH_MISMATCH,
    HASH_MISMATCH_EXIT,
    Cluster,
    JobState,
    job_manifest,
    job_name,
    job_state,
    terminated_exit_code,
)
from tasks.worker.zombie_tracker import Activity

logger = logging.getLogger("tasks.worker")
PREVIOUS_GONE_SECONDS = 60.0  # how long to wait for an earlier attempt's Job to go away


class Admission(Protocol):
    def counted(self, run_id: UUID) -> None: ...  # the run's pod exists (the quota counts it)
    def ended(self, run_id: UUID) -> None: ...  # its Job ended: capacity is read again


def execute(
    run: ClaimedRun,
    *,
    cancel: threading.Event,
    timeout: float,
    activity: Activity | None = None,
    admission: Admission | None = None,
) -> ExecutionResult:
    """The worker's executor: executables as Jobs, every other kind as before. A Job reports
    its log output and status changes to `activity` (zombie detection,
    tasks/worker/zombie_tracker.py: its CPU is not visible here)."""
    try:
        if run.kind != "executable":
            return executors.execute(run, cancel=cancel, timeout=timeout, activity=activity)
        job = JobRun(
            Cluster.shared(),
            run,
            cancel=cancel,
            timeout=timeout,
            admission=admission,
            activity=activity,
        )
        return job.run()
    except Exception as exc:  # a cluster error fails the attempt; the worker carries on
        logger.warning("run=%s: kubernetes job failed: %s", run.id, exc)
        return ExecutionResult(ok=False, error=f"kubernetes: {type(exc).__name__}: {exc}")
    finally:
        if admission is not None:  # its reservation (if any) ends with it
            admission.ended(run.id)


def presigned_url(name: str, *, seconds: float) -> str:
    url = default_storage.url(name, expire=int(seconds))  # type: ignore[call-arg]
    if not url.startswith(("http://", "https://")):
        raise RuntimeError("the kubernetes executor needs SCHEDULER_STORAGE=s3 (a URL pods reach)")
    return url


class JobRun:
    def __init__(
        self,
        cluster: Cluster,
        run: ClaimedRun,
        *,
        cancel: threading.Event,
        timeout: float,
        admission: Admission | None = None,
        activity: Activity | None = None,
    ) -> None:
        self.admission = admission
        self.activity = activity
        # The log's last line (with its timestamp) and the Job's status, as last seen: a change
        # of either is activity. The log is read at most every tenth of the zombie threshold.
        self.seen_log: str | None = None
        self.seen_status: object = None
        self.log_every = max(
            settings.SCHEDULER_K8S_POLL_SECONDS, settings.TASKS_ZOMBIE_AFTER_SECONDS / 10
        )
        self.log_read_at = 0.0
        self.pod: str | None = None
        self.cluster = cluster
        self.run_ = run
        self.cancel = cancel
        self.timeout = timeout
        self.name = job_name(run.id, run.attempt)
        self.poll = settings.SCHEDULER_K8S_POLL_SECONDS

    def run(self) -> ExecutionResult:
        adopted = self._settle_previous_attempts()
        if adopted is not None:
            return adopted
        if self.cancel.is_set():
            return ExecutionResult(ok=False, cancelled=True, error="cancelled")
        resources = Task.objects.filter(id=self.run_.task_id).values_list("resources", flat=True)
        start_deadline = settings.SCHEDULER_K8S_START_DEADLINE_SECONDS
        url = presigned_url(self.run_.executable, seconds=self.timeout + start_deadline + 600)
        manifest = job_manifest(
            self.run_,
            resources=dict(resources.first() or {}),
            url=url,
            sha256=sha256_of(self.run_.executable),
            timeout=self.timeout,
        )
        self.cluster.create_job(manifest)
        logger.info("run=%s job=%s created", self.run_.id, self.name)
        if self.activity is not None:
            self.activity.output_at = time.monotonic()
            self.activity.job = self.name  # from now on the zombie check watches it
        return self._follow(self.name, created=time.monotonic())

    def _settle_previous_attempts(self) -> ExecutionResult | None:
        """Two Jobs of one run never run at once: an earlier attempt's Job (its worker died, the
        reviewer gave the run back) is deleted and waited for, or adopted if it succeeded."""
        for job in self.cluster.jobs_of_run(self.run_.id):
            name = job.metadata.name
            if name == self.name:
                continue  # this attempt's own Job, made before a crash: _follow watches it
            state = job_state(job)
            if state.done and state.succeeded:
                logger.info("run=%s adopts the finished job %s", self.run_.id, name)
                result = self._result(name, state.succeeded, state.reason)
                self.cluster.delete_job(name)
                return result
            self.cluster.delete_job(name, propagation="Foreground")
            deadline = time.monotonic() + PREVIOUS_GONE_SECONDS
            while self.cluster.read_job(name) is not None:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the earlier attempt's job {name} is still there")
                time.sleep(0.2)
            logger.info("run=%s deleted the earlier attempt's job %s", self.run_.id, name)
        return None

    def _follow(self, name: str, *, created: float) -> ExecutionResult:
        deadline = created + self.timeout + 5.0  # the Job's own deadline ends it first
        start_deadline = created + settings.SCHEDULER_K8S_START_DEADLINE_SECONDS
        while True:
            if self.cancel.wait(self.poll):
                self.cluster.delete_job(name)  # Background: the pod goes with it
                return ExecutionResult(ok=False, cancelled=True, error="cancelled")
            job = self.cluster.read_job(name)
            if job is None:
                return ExecutionResult(ok=False, error=f"job {name} was deleted")
            state = job_state(job)
            if self.admission is not None and (state.active or state.done):
                self.admission.counted(self.run_.id)
            if self.activity is not None and not state.done:
                self._observe(name, job, state)
            if state.done:
                if state.reason == "DeadlineExceeded":
                    self.cluster.delete_job(name)
                    return ExecutionResult(
                        ok=False, timed_out=True, error="timed out", output=self._log(name)
                    )
                return self._result(name, state.succeeded, state.reason)
            now = time.monotonic()
            if now >= deadline:
                self.cluster.delete_job(name)
                return ExecutionResult(ok=False, timed_out=True, error="timed out")
            if now >= start_deadline:
                pod = self.cluster.pod_of(name)
                if pod is None or (pod.status and pod.status.phase == "Pending"):
                    _, why = terminated_exit_code(pod) if pod is not None else (None, "")
                    self.cluster.delete_job(name)
                    return ExecutionResult(
                        ok=False, error=f"pod did not start: {why or 'unschedulable'}"
                    )

    def _observe(self, name: str, job: Any, state: JobState) -> None:
        """Move `activity.output_at` when the Job's status or its log's last line changed."""
        assert self.activity is not None
        now = time.monotonic()
        status = (state, getattr(job.status, "ready", None), getattr(job.status, "active", None))
        if status != self.seen_status:
            self.seen_status = status
            self.activity.output_at = now
        if now - self.log_read_at < self.log_every:
            return
        self.log_read_at = now
        if self.pod is None:
            pod = self.cluster.pod_of(name)
            self.pod = pod.metadata.name if pod is not None else None
        if self.pod is not None:
            last = self.cluster.pod_log_tail(self.pod)
            if last != self.seen_log:
                self.seen_log = last
                self.activity.output_at = now

    def _log(self, name: str) -> str:
        pod = self.cluster.pod_of(name)
        return cap_output(self.cluster.pod_log(pod.metadata.name)) if pod is not None else ""

    def _result(self, name: str, succeeded: bool, reason: str) -> ExecutionResult:
        pod: Any = self.cluster.pod_of(name)
        exit_code, why = terminated_exit_code(pod) if pod is not None else (None, "")
        output = cap_output(self.cluster.pod_log(pod.metadata.name)) if pod is not None else ""
        if exit_code is None and succeeded:
            exit_code = 0
        ok = succeeded and exit_code == 0
        error = "" if ok else (f"exit code {exit_code}" if exit_code else reason or why)
        if exit_code == HASH_MISMATCH_EXIT:  # the pod's own check refused the fetched bytes
            said = [line for line in output.splitlines() if line.startswith(HASH_MISMATCH)]
            error = said[-1] if said else error
        return ExecutionResult(ok=ok, error=error, output=output, exit_code=exit_code)
