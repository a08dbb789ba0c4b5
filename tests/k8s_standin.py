"""A stand-in for the Kubernetes API on 127.0.0.1, for the `kubernetes` client in tests.

It serves the endpoints the Kubernetes executor uses (batch/v1 Jobs; core/v1 Pods, pod logs,
Nodes, ResourceQuotas) with the status shapes the real API returns, and runs each Job's container
command (`command` + `args`, its `env`) as a local process in its own session: deleting the Job
kills it, and `activeDeadlineSeconds` ends it with the `DeadlineExceeded` condition. It records
every Job's lifetime (`history`) so tests can check what ran when, and for how much CPU. Pod
logs honour `tailLines` and `timestamps`.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from tasks.resources import cpu_millis

UNPULLABLE = "unpullable"  # an image name containing this never starts (ImagePullBackOff)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class FakeJob:
    body: dict[str, Any]
    pod: str
    proc: subprocess.Popen | None
    log: Path
    started: float = field(default_factory=time.monotonic)
    ended: float | None = None
    exit_code: int | None = None
    deadline_exceeded: bool = False
    start_time: str = field(default_factory=_now)
    end_time: str | None = None

    @property
    def name(self) -> str:
        return self.body["metadata"]["name"]

    @property
    def container(self) -> dict[str, Any]:
        return self.body["spec"]["template"]["spec"]["containers"][0]

    @property
    def cpu_millis(self) -> int:
        requests = (self.container.get("resources") or {}).get("requests") or {}
        return cpu_millis(requests["cpu"]) if "cpu" in requests else 0

    def job_json(self) -> dict[str, Any]:
        status: dict[str, Any] = {"startTime": self.start_time}
        if self.ended is None:
            status["active"] = 1
        elif self.exit_code == 0 and not self.deadline_exceeded:
            status.update(
                succeeded=1,
                completionTime=self.end_time,
                conditions=[
                    _condition("SuccessCriteriaMet", "CompletionsReached"),
                    _condition("Complete", "CompletionsReached"),
                ],
            )
        else:
            reason = "DeadlineExceeded" if self.deadline_exceeded else "BackoffLimitExceeded"
            status.update(
                failed=1,
                conditions=[_condition("FailureTarget", reason), _condition("Failed", reason)],
            )
        return {**self.body, "status": status}

    def pod_json(self) -> dict[str, Any]:
        meta = self.body["metadata"]
        container = self.container
        if self.proc is None:  # its image cannot be pulled: pending for good
            phase = "Pending"
            state = {
                "waiting": {
                    "reason": "ImagePullBackOff",
                    "message": f"Back-off pulling image {container['image']}",
                }
            }
        elif self.ended is None:
            phase, state = "Running", {"running": {"startedAt": self.start_time}}
        else:
            phase = "Succeeded" if self.exit_code == 0 else "Failed"
            reason = "Completed" if phase == "Succeeded" else "Error"
            state = {
                "terminated": {
                    "exitCode": self.exit_code,
                    "reason": reason,
                    "startedAt": self.start_time,
                    "finishedAt": self.end_time,
                }
            }
        running = self.proc is not None and self.ended is None
        labels = {
            **meta.get("labels", {}),
            "job-name": self.name,
            "batch.kubernetes.io/job-name": self.name,
            "controller-uid": meta["uid"],
        }
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": self.pod,
                "namespace": meta["namespace"],
                "labels": labels,
                "uid": str(uuid.uuid4()),
                "creationTimestamp": self.start_time,
            },
            "spec": self.body["spec"]["template"]["spec"],
            "status": {
                "phase": phase,
                "startTime": self.start_time,
                "containerStatuses": [
                    {
                        "name": container["name"],
                        "image": container["image"],
                        "imageID": f"docker.io/library/{container['image']}@sha256:{'0' * 64}",
                        "ready": running,
                        "restartCount": 0,
                        "started": running,
                        "state": state,
                    }
                ],
            },
        }


def _condition(kind: str, reason: str) -> dict[str, str]:
    return {
        "type": kind,
        "status": "True",
        "reason": reason,
        "message": reason,
        "lastProbeTime": _now(),
        "lastTransitionTime": _now(),
    }


def _matches(labels: dict[str, str], selector: str) -> bool:
    pairs = [p.split("=", 1) for p in selector.split(",") if "=" in p]
    return all(labels.get(k.strip()) == v.strip() for k, v in pairs)


class KubeStandIn:
    def __init__(self, *, workdir: Path, node_cpu: str = "8", node_memory: str = "16Gi") -> None:
        self.workdir = workdir
        self.jobs: dict[str, FakeJob] = {}
        self.history: list[FakeJob] = []  # every Job ever made, deleted ones included
        self.quota_hard: dict[str, str] | None = None
        self.node_allocatable = {"cpu": node_cpu, "memory": node_memory, "pods": "110"}
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.port = self.server.server_address[1]
        self.threads = [
            threading.Thread(target=self.server.serve_forever, daemon=True),
            threading.Thread(target=self._reap, daemon=True),
        ]

    def start(self) -> KubeStandIn:
        for thread in self.threads:
            thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self.server.shutdown()
        with self.lock:
            for job in self.jobs.values():
                self._kill(job)

    def kubeconfig(self, path: Path) -> Path:
        # JSON is YAML.
        path.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "current-context": "standin",
                    "clusters": [
                        {"name": "standin", "cluster": {"server": f"http://127.0.0.1:{self.port}"}}
                    ],
                    "users": [{"name": "standin", "user": {"token": "standin-token"}}],
                    "contexts": [
                        {"name": "standin", "context": {"cluster": "standin", "user": "standin"}}
                    ],
                }
            )
        )
        return path

    # --- what tests ask -------------------------------------------------------------------
    def max_cpu_at_once(self) -> int:
        """Most CPU (millicores) requested by Jobs alive at the same instant."""
        points = [(j.started, j.cpu_millis) for j in self.history]
        points += [(j.ended or time.monotonic(), -j.cpu_millis) for j in self.history]
        total = best = 0
        for _, delta in sorted(points, key=lambda p: (p[0], p[1])):  # ends before starts
            total += delta
            best = max(best, total)
        return best

    # --- the cluster ----------------------------------------------------------------------
    def _reap(self) -> None:
        while not self.stopping.wait(0.05):
            with self.lock:
                for job in self.jobs.values():
                    if job.ended is not None or job.proc is None:
                        continue
                    code = job.proc.poll()
                    deadline = job.body["spec"].get("activeDeadlineSeconds")
                    if code is None and deadline and time.monotonic() - job.started > deadline:
                        job.deadline_exceeded = True
                        self._kill(job)
                        code = job.proc.wait()
                    if code is not None:
                        job.exit_code = code if code >= 0 else 128 - code
                        job.ended, job.end_time = time.monotonic(), _now()

    def _kill(self, job: FakeJob) -> None:
        if job.proc is not None and job.proc.poll() is None:
            os.killpg(job.proc.pid, signal.SIGKILL)
            job.proc.wait()
        if job.ended is None:
            job.ended, job.end_time = time.monotonic(), _now()

    def create_job(self, namespace: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        name = body["metadata"]["name"]
        with self.lock:
            if name in self.jobs:
                return 409, _status(409, "AlreadyExists", f'jobs.batch "{name}" already exists')
            meta = body["metadata"]
            meta.update(
                namespace=namespace,
                uid=str(uuid.uuid4()),
                resourceVersion="1",
                creationTimestamp=_now(),
            )
            container = body["spec"]["template"]["spec"]["containers"][0]
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
            env.update({e["name"]: e.get("value", "") for e in container.get("env", [])})
            rundir = Path(tempfile.mkdtemp(dir=self.workdir, prefix=f"{name}-"))
            log = rundir / "log"
            proc = None
            with log.open("wb") as out:
                if UNPULLABLE not in container["image"]:
                    proc = subprocess.Popen(
                        [*container.get("command", []), *container.get("args", [])],
                        env=env,
                        cwd=rundir,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL,
                        start_new_session=True,
                    )
            job = FakeJob(body=body, pod=f"{name}-{uuid.uuid4().hex[:5]}", proc=proc, log=log)
            self.jobs[name] = job
            self.history.append(job)
            return 201, job.job_json()

    def delete_job(self, name: str) -> tuple[int, dict[str, Any]]:
        with self.lock:
            job = self.jobs.pop(name, None)
            if job is None:
                return 404, _status(404, "NotFound", f'jobs.batch "{name}" not found')
            self._kill(job)  # the pod goes with its Job (propagation Background/Foreground)
            return 200, _status(200, "", "", success=True)

    def quota_json(self, namespace: str) -> dict[str, Any]:
        items = []
        if self.quota_hard is not None:
            with self.lock:
                alive = [j for j in self.jobs.values() if j.ended is None]
                used_cpu = sum(j.cpu_millis for j in alive)
            items.append(
                {
                    "metadata": {"name": "compute", "namespace": namespace},
                    "spec": {"hard": dict(self.quota_hard)},
                    "status": {
                        "hard": dict(self.quota_hard),
                        "used": {"requests.cpu": f"{used_cpu}m", "requests.memory": "0"},
                    },
                }
            )
        return {"apiVersion": "v1", "kind": "ResourceQuotaList", "metadata": {}, "items": items}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, body: Any, *, text: bool = False) -> None:
                data = body.encode() if text else json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "text/plain" if text else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                url = urlparse(self.path)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                m = re.fullmatch(r"/apis/batch/v1/namespaces/([^/]+)/jobs", url.path)
                if not m:
                    return self._send(404, _status(404, "NotFound", url.path))
                self._send(*standin.create_job(m[1], body))

            def do_DELETE(self) -> None:
                url = urlparse(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                m = re.fullmatch(r"/apis/batch/v1/namespaces/[^/]+/jobs/([^/]+)", url.path)
                if not m:
                    return self._send(404, _status(404, "NotFound", url.path))
                self._send(*standin.delete_job(m[1]))

            def do_GET(self) -> None:
                url = urlparse(self.path)
                selector = parse_qs(url.query).get("labelSelector", [""])[0]
                path = url.path
                with standin.lock:
                    jobs = list(standin.jobs.values())
                if m := re.fullmatch(r"/apis/batch/v1/namespaces/[^/]+/jobs/([^/]+)", path):
                    job = standin.jobs.get(m[1])
                    if job is None:
                        return self._send(404, _status(404, "NotFound", m[1]))
                    return self._send(200, job.job_json())
                if re.fullmatch(r"/apis/batch/v1/namespaces/[^/]+/jobs", path):
                    items = [
                        j.job_json()
                        for j in jobs
                        if _matches(j.body["metadata"].get("labels", {}), selector)
                    ]
                    return self._send(
                        200,
                        {
                            "apiVersion": "batch/v1",
                            "kind": "JobList",
                            "metadata": {},
                            "items": items,
                        },
                    )
                if m := re.fullmatch(r"/api/v1/namespaces/[^/]+/pods/([^/]+)/log", path):
                    found = [j for j in jobs if j.pod == m[1]]
                    if not found:
                        return self._send(404, _status(404, "NotFound", m[1]))
                    query = parse_qs(url.query)
                    return self._send(200, _log_text(found[0].log, query), text=True)
                if re.fullmatch(r"/api/v1/namespaces/[^/]+/pods", path):
                    pods = [j.pod_json() for j in jobs]
                    items = [p for p in pods if _matches(p["metadata"]["labels"], selector)]
                    return self._send(
                        200, {"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": items}
                    )
                if m := re.fullmatch(r"/api/v1/namespaces/([^/]+)/resourcequotas", path):
                    return self._send(200, standin.quota_json(m[1]))
                if path == "/api/v1/nodes":
                    node = {
                        "metadata": {"name": "standin-node"},
                        "status": {
                            "allocatable": standin.node_allocatable,
                            "capacity": standin.node_allocatable,
                        },
                    }
                    return self._send(
                        200,
                        {"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": [node]},
                    )
                self._send(404, _status(404, "NotFound", path))

        return Handler


def _log_text(log: Path, query: dict[str, list[str]]) -> str:
    """A pod's log as the API serves it: `tailLines` last lines, each prefixed with an RFC 3339
    time when `timestamps` is true (as Go's ParseBool reads it). The time is the log file's
    last write: lines carry no time of their own, and the last line's, which a follower
    compares, is that one."""
    lines = log.read_text(errors="replace").splitlines(keepends=True)
    if "tailLines" in query:
        lines = lines[-int(query["tailLines"][0]) :] if int(query["tailLines"][0]) else []
    if query.get("timestamps", ["false"])[0] in ("1", "t", "T", "true", "True", "TRUE"):
        at = datetime.fromtimestamp(log.stat().st_mtime, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        lines = [f"{at} {line}" for line in lines]
    return "".join(lines)


def _status(code: int, reason: str, message: str, *, success: bool = False) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Status",
        "metadata": {},
        "status": "Success" if success else "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
