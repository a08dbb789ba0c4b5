"""The batch/v1 Job an executable run becomes, and the cluster calls around it.

One Job per attempt, named after the run and the attempt: creating it twice is a no-op (409 means
"already made"), and the Jobs of one run are found by the `scheduler/run-id` label. The pod gets
no cluster or storage credentials: it fetches the executable from a presigned URL in its
environment with a POSIX shell and curl or python3 (which the image must have), and runs it only
if its SHA-256 is the one the worker expects (sha256sum, else python3).
"""

from __future__ import annotations

import math
import os
import threading
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from tasks.transitions.claim import ClaimedRun

RUN_LABEL = "scheduler/run-id"
TASK_LABEL = "scheduler/task-id"
ATTEMPT_LABEL = "scheduler/attempt"

# The container's exit code when the fetched bytes are not the executable the run names.
HASH_MISMATCH_EXIT = 97
HASH_MISMATCH = "scheduler: the executable's SHA-256 is"  # how its message starts (stderr)

# Fetch with curl, else python3; check the SHA-256 (sha256sum, else python3); then run it with
# the task's args ("$@").
FETCH_CHECK_AND_RUN = (
    'set -e; d="$(mktemp -d)"; cd "$d"; '
    "if command -v curl >/dev/null 2>&1; then "
    'curl -fsS --retry 3 -o payload "$SCHEDULER_EXECUTABLE_URL"; '
    "else python3 -c 'import sys, urllib.request; "
    "urllib.request.urlretrieve(sys.argv[1], sys.argv[2])' "
    '"$SCHEDULER_EXECUTABLE_URL" payload; fi; '
    'if command -v sha256sum >/dev/null 2>&1; then sum="$(sha256sum payload)"; '
    "else sum=\"$(python3 -c 'import hashlib, sys; "
    'print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())\' payload)"; fi; '
    'sum="${sum%% *}"; '
    'if [ "$sum" != "$SCHEDULER_EXECUTABLE_SHA256" ]; then '
    f'echo "{HASH_MISMATCH} $sum, not $SCHEDULER_EXECUTABLE_SHA256: not run" >&2; '
    f"exit {HASH_MISMATCH_EXIT}; fi; "
    'chmod +x payload; exec ./payload "$@"'
)


def job_name(run_id: object, attempt: int) -> str:
    return f"sched-{run_id}-{attempt}"  # 52 characters at most: pod names add 6


def run_env(run: ClaimedRun, *, url: str, sha256: str) -> dict[str, str]:
    """What local runs get (ClaimedRun.environment), plus where to fetch the executable and
    the SHA-256 its bytes must have."""
    return {
        **run.environment(),
        "SCHEDULER_EXECUTABLE_URL": url,
        "SCHEDULER_EXECUTABLE_SHA256": sha256,
    }


def job_manifest(
    run: ClaimedRun, *, resources: dict[str, str], url: str, sha256: str, timeout: float
) -> dict[str, Any]:
    """The Job for this attempt of `run` (a plain dict, as the API takes it)."""
    labels = {
        RUN_LABEL: str(run.id),
        TASK_LABEL: str(run.task_id),
        ATTEMPT_LABEL: str(run.attempt),
    }
    container: dict[str, Any] = {
        "name": "payload",
        "image": settings.SCHEDULER_K8S_IMAGE,
        "command": ["/bin/sh", "-c", FETCH_CHECK_AND_RUN, "payload"],
        "args": [str(a) for a in run.payload.get("args") or []],
        "env": [{"name": k, "value": v} for k, v in run_env(run, url=url, sha256=sha256).items()],
    }
    if resources:
        # Limits equal to requests: the quota admits on requests, and a pod may not use more.
        container["resources"] = {"requests": dict(resources), "limits": dict(resources)}
    pod_spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [container]}
    if settings.SCHEDULER_K8S_SERVICE_ACCOUNT:
        pod_spec["serviceAccountName"] = settings.SCHEDULER_K8S_SERVICE_ACCOUNT
    pod_spec["automountServiceAccountToken"] = False  # the payload gets no cluster credentials
    if settings.SCHEDULER_K8S_NODE_SELECTOR:
        pod_spec["nodeSelector"] = dict(
            item.split("=", 1) for item in settings.SCHEDULER_K8S_NODE_SELECTOR if "=" in item
        )
    if settings.SCHEDULER_K8S_IMAGE_PULL_SECRETS:
        pod_spec["imagePullSecrets"] = [
            {"name": n} for n in settings.SCHEDULER_K8S_IMAGE_PULL_SECRETS
        ]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": job_name(run.id, run.attempt), "labels": labels},
        "spec": {
            "backoffLimit": 0,  # retries are the scheduler's (attempts, backoff)
            "activeDeadlineSeconds": max(1, math.ceil(timeout)),
            "ttlSecondsAfterFinished": settings.SCHEDULER_K8S_TTL_SECONDS,
            "template": {"metadata": {"labels": labels}, "spec": pod_spec},
        },
    }


@dataclass(frozen=True)
class JobState:
    """What a Job came to so far: `done` once it succeeded, failed or passed its deadline."""

    done: bool
    succeeded: bool = False
    reason: str = ""
    active: bool = False


def job_state(job: Any) -> JobState:
    status = job.status
    for cond in (status and status.conditions) or []:
        if cond.status == "True" and cond.type in ("Complete", "Failed"):
            return JobState(done=True, succeeded=cond.type == "Complete", reason=cond.reason or "")
    if status and status.succeeded:
        return JobState(done=True, succeeded=True)
    if status and status.failed:
        return JobState(done=True, reason="failed")
    return JobState(done=False, active=bool(status and status.active))


class Cluster:
    """The namespace the executor works in, through the official client (thread-safe)."""

    _lock = threading.Lock()
    _shared: Cluster | None = None

    def __init__(self) -> None:
        if os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config()
        else:
            # KUBECONFIG as it is now (the client reads it once, at import), else ~/.kube/config.
            config.load_kube_config(config_file=os.environ.get("KUBECONFIG"))
        api = client.ApiClient()
        self.batch = client.BatchV1Api(api)
        self.core = client.CoreV1Api(api)
        self.namespace = settings.SCHEDULER_K8S_NAMESPACE

    @classmethod
    def shared(cls) -> Cluster:
        with cls._lock:
            if cls._shared is None:
                cls._shared = cls()
            return cls._shared

    def create_job(self, manifest: dict[str, Any]) -> None:
        try:
            self.batch.create_namespaced_job(self.namespace, manifest)
        except ApiException as exc:
            if exc.status != 409:  # 409: made before (a repeated create) - watch that one
                raise

    def read_job(self, name: str) -> Any | None:
        try:
            return self.batch.read_namespaced_job(name, self.namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def jobs_of_run(self, run_id: object) -> list[Any]:
        found = self.batch.list_namespaced_job(
            self.namespace, label_selector=f"{RUN_LABEL}={run_id}"
        )
        return list(found.items)

    def delete_job(self, name: str, *, propagation: str = "Background") -> None:
        try:
            self.batch.delete_namespaced_job(name, self.namespace, propagation_policy=propagation)
        except ApiException as exc:
            if exc.status != 404:
                raise

    def pod_of(self, job: str) -> Any | None:
        pods = self.core.list_namespaced_pod(self.namespace, label_selector=f"job-name={job}")
        return pods.items[0] if pods.items else None

    def pod_log_tail(self, pod: str) -> str:
        """The log's last line with its timestamp ("" before any output): it changes whenever
        the pod writes, even the same words again."""
        try:
            raw = self.core.read_namespaced_pod_log(
                pod, self.namespace, tail_lines=1, timestamps=True, _preload_content=False
            )
            return raw.data.decode("utf-8", errors="replace")
        except ApiException as exc:
            if exc.status in (400, 404):
                return ""
            raise

    def pod_log(self, pod: str) -> str:
        try:
            # Raw bytes: the client's own decoding of a `str` answer varies between versions.
            raw = self.core.read_namespaced_pod_log(pod, self.namespace, _preload_content=False)
            return raw.data.decode("utf-8", errors="replace")
        except ApiException as exc:
            if exc.status in (400, 404):  # no container yet, or the pod is gone
                return ""
            raise


def terminated_exit_code(pod: Any) -> tuple[int | None, str]:
    """The payload container's exit code and reason once terminated; (None, waiting reason)."""
    statuses = (pod.status and pod.status.container_statuses) or []
    for status in statuses:
        state = status.state
        if state and state.terminated:
            return state.terminated.exit_code, state.terminated.reason or ""
        if state and state.waiting:
            return None, state.waiting.reason or ""
    return None, ""
