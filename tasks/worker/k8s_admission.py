"""Admission by the cluster's free capacity, for `runworker --executor kubernetes`.

Capacity is the namespace's ResourceQuota (`hard - used` for requests.cpu / requests.memory)
when there is one, else the nodes' allocatable minus the requests of active Jobs. Before each
claim the worker asks `admit` how many runs to claim: the due runs in claim order (priority,
then due time) are taken while their requests fit, and the first that does not fit stops the
walk (strict priority: nothing lower starts before it); the ones left show
`waiting_for_resource`. A run that needs more than the whole capacity blocks no one. Runs claimed
here whose pod the quota does not count yet are reserved locally, so two claims never spend the
same capacity.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import connection

from scheduler_project.sql import queries
from tasks import outbox
from tasks.resources import cpu_millis, memory_bytes
from tasks.schedules import RUN_ALL_CAP
from tasks.transitions import claim
from tasks.transitions.claim import ClaimedRun
from tasks.worker.k8s_job import RUN_LABEL, Cluster, job_state

logger = logging.getLogger("tasks.worker")
UNLIMITED = 2**62
K8S_WAIT_REASON = "waiting for free capacity in the Kubernetes namespace"
REREAD_SECONDS = 2.0  # capacity is read again at least this often, and after every Job's end

SQL = queries("tasks", "k8s_admission.sql")


@functools.cache
def claim_ids_sql() -> str:
    """The claim by id, with the claim's own misfire CTEs written in."""
    return (
        SQL["claim_ids"]
        .replace("{misfire_ctes}", claim.SQL["misfire_ctes"])
        .replace("{run_all_cap}", str(int(RUN_ALL_CAP)))
    )


@dataclass(frozen=True)
class Need:
    cpu: int = 0  # millicores
    memory: int = 0  # bytes

    @classmethod
    def of(cls, resources: dict[str, Any] | None) -> Need:
        resources = resources or {}
        return cls(
            cpu=cpu_millis(str(resources["cpu"])) if "cpu" in resources else 0,
            memory=memory_bytes(str(resources["memory"])) if "memory" in resources else 0,
        )

    def __add__(self, other: Need) -> Need:
        return Need(self.cpu + other.cpu, self.memory + other.memory)

    def __sub__(self, other: Need) -> Need:
        return Need(self.cpu - other.cpu, self.memory - other.memory)

    def fits(self, free: Need) -> bool:
        return self.cpu <= free.cpu and self.memory <= free.memory


def read_capacity(cluster: Cluster) -> tuple[Need, Need]:
    """(free, total) in the namespace: its ResourceQuota's, else the nodes' less active Jobs'."""
    quotas = cluster.core.list_namespaced_resource_quota(cluster.namespace).items
    if quotas:
        free, total = Need(UNLIMITED, UNLIMITED), Need(UNLIMITED, UNLIMITED)
        for quota in quotas:  # several quotas: each must admit the pod
            hard = (quota.status and quota.status.hard) or (quota.spec and quota.spec.hard) or {}
            used = (quota.status and quota.status.used) or {}
            cpu = _limit(hard, used, "requests.cpu", cpu_millis)
            mem = _limit(hard, used, "requests.memory", memory_bytes)
            free = Need(min(free.cpu, cpu[0]), min(free.memory, mem[0]))
            total = Need(min(total.cpu, cpu[1]), min(total.memory, mem[1]))
        return free, total
    total = Need()
    for node in cluster.core.list_node().items:
        allocatable = (node.status and node.status.allocatable) or {}
        total = total + Need.of({k: v for k, v in allocatable.items() if k in ("cpu", "memory")})
    active = Need()
    jobs = cluster.batch.list_namespaced_job(cluster.namespace, label_selector=RUN_LABEL).items
    for job in jobs:
        if not job_state(job).done:
            for container in job.spec.template.spec.containers:
                requests = (container.resources and container.resources.requests) or {}
                active = active + Need.of(requests)
    return total - active, total


def _limit(hard: dict, used: dict, key: str, measure: Any) -> tuple[int, int]:
    if key not in hard:
        return UNLIMITED, UNLIMITED
    total = measure(str(hard[key]))
    return total - measure(str(used.get(key, "0"))), total


class QuotaAdmission:
    def __init__(self, cluster_factory: Any = Cluster.shared) -> None:
        self.cluster_factory = cluster_factory
        self.lock = threading.Lock()
        self.reserved: dict[UUID, Need] = {}  # claimed here, not yet counted by the quota
        self.read_at = 0.0
        self.changed = threading.Event()  # a Job ended or was made: read capacity again
        self.cached: tuple[Need, Need] | None = None

    # --- told by the executor threads -----------------------------------------------------
    def counted(self, run_id: UUID) -> None:
        """The run's pod exists: the quota's `used` (or the active Jobs) count it now."""
        with self.lock:
            self.reserved.pop(run_id, None)
        self.changed.set()

    def ended(self, run_id: UUID) -> None:
        self.counted(run_id)

    # --- asked by the worker's main thread ------------------------------------------------
    def capacity(self) -> tuple[Need, Need]:
        now = time.monotonic()
        if self.cached is None or self.changed.is_set() or now - self.read_at >= REREAD_SECONDS:
            self.changed.clear()
            self.cached = read_capacity(self.cluster_factory())
            self.read_at = now
        free, total = self.cached
        with self.lock:
            for need in self.reserved.values():
                free = free - need
        return free, total

    def plan(self, *, slots: int, prefetch: float) -> list[UUID]:
        """The due runs to claim now, in claim order (at most `slots`); the ones held back by
        capacity are marked `waiting_for_resource`."""
        if slots <= 0:
            return []
        free, total = self.capacity()
        with connection.cursor() as cursor:
            cursor.execute(SQL["due"], {"prefetch": prefetch, "limit": slots * 4})
            due = cursor.fetchall()
        admitted: list[UUID] = []
        waiting: list[UUID] = []
        blocked = False
        for run_id, resources in due:
            need = Need.of(json.loads(resources) if isinstance(resources, str) else resources)
            if not need.fits(total):
                waiting.append(run_id)  # fits no capacity at all: waits, blocks no one
            elif blocked:
                waiting.append(run_id)
            elif len(admitted) >= slots:
                break
            elif not need.fits(free):
                blocked = True  # strict priority: nothing after it starts first
                waiting.append(run_id)
            else:
                free = free - need
                admitted.append(run_id)
        if waiting:
            with connection.cursor() as cursor:
                cursor.execute(SQL["mark_waiting"], {"ids": waiting, "reason": K8S_WAIT_REASON})
        return admitted

    def claim(self, *, worker: str, slots: int, prefetch: float) -> list[ClaimedRun]:
        """Claim the runs `plan` admits, and reserve their requests."""
        ids = self.plan(slots=slots, prefetch=prefetch)
        if not ids:
            return []
        with connection.cursor() as cursor:
            cursor.execute(claim_ids_sql(), {
                "ids": ids, "worker": worker,
                "window": settings.NOTIFICATIONS_RETRY_WINDOW_SECONDS,
                "channel": outbox.NOTIFICATION_CHANNEL,
            })  # fmt: skip
            rows = cursor.fetchall()
        with self.lock:
            for row in rows:
                resources = json.loads(row[-1]) if isinstance(row[-1], str) else row[-1]
                self.reserved[row[0]] = Need.of(resources)
        claimed = [ClaimedRun(*row[:-1]) for row in rows]
        for run in claimed:
            if isinstance(run.payload, str):  # Django's psycopg setup leaves jsonb undecoded
                run.payload = json.loads(run.payload)
        at = min((run.claimed_at for run in claimed), default=None)
        for run in claimed:
            run.claimed_at = at or run.claimed_at  # one claim time per batch, as the claim's
        order = {run_id: n for n, run_id in enumerate(ids)}
        return sorted(claimed, key=lambda run: order[run.id])  # started in admission order
