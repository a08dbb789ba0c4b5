"""The capacity `runworker --executor kubernetes` offers to the claim: the namespace's.

Capacity is the namespace's ResourceQuota (`hard - used` for requests.cpu / requests.memory)
when there is one, else the nodes' allocatable minus the requests of active Jobs. The worker
offers it to the standard claim (tasks/sql/claim.sql) as a local worker offers `--cpu/--memory`:
the quota's `hard` as its totals, and as free what the quota leaves less the requests of the
runs it claimed whose pod the quota does not count yet (so two claims never spend the same
capacity). Strict priority, the per-owner cap and the misfire rule are the claim's.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from tasks.resources import cpu_millis, memory_bytes
from tasks.transitions.claim import UNLIMITED, Capacity, ClaimedRun
from tasks.worker.k8s_job import RUN_LABEL, Cluster, job_state

REREAD_SECONDS = 2.0  # capacity is read again at least this often, and after every Job's end


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


class NamespaceCapacity:
    """The namespace's capacity as the worker's main thread offers it to each claim; the
    executor threads say when a run's pod is counted by the quota, or its Job ended."""

    def __init__(self, cluster_factory: Any = Cluster.shared) -> None:
        self.cluster_factory = cluster_factory
        self.lock = threading.Lock()
        self.counted_runs: set[UUID] = set()  # claimed here, and counted by the quota now
        self.read_at = 0.0
        self.changed = threading.Event()  # a Job ended or was made: read capacity again
        self.cached: tuple[Need, Need] | None = None  # (free, total) as last read

    # --- told by the executor threads -----------------------------------------------------
    def counted(self, run_id: UUID) -> None:
        """The run's pod exists: the quota's `used` (or the active Jobs) count it now."""
        with self.lock:
            self.counted_runs.add(run_id)
        self.changed.set()

    def ended(self, run_id: UUID) -> None:
        """Its Job ended (or never was made): nothing of it is to be reserved any more."""
        self.counted(run_id)

    # --- asked by the worker's main thread ------------------------------------------------
    def refresh(self) -> None:
        """Read the cluster if the figures are stale (raises the cluster's errors)."""
        now = time.monotonic()
        if self.cached is None or self.changed.is_set() or now - self.read_at >= REREAD_SECONDS:
            self.changed.clear()
            self.cached = read_capacity(self.cluster_factory())
            self.read_at = now

    def offer(self, held: list[ClaimedRun]) -> Capacity:
        """The claim's capacity: the totals, and the free capacity less the requests of the
        `held` runs (claimed here, result not recorded) whose pod the quota does not count.
        Before the cluster was ever read: nothing (a run without requests still fits)."""
        if self.cached is None:
            return Capacity(0, 0, 0, 0)
        free, total = self.cached
        ids = {run.id for run in held}
        with self.lock:
            self.counted_runs &= ids  # runs recorded since are gone from `held`
            pending = [run for run in held if run.id not in self.counted_runs]
        free = free - Need(sum(r.cpu_millis for r in pending), sum(r.memory_bytes for r in pending))
        return Capacity(total.cpu, total.memory, free.cpu, free.memory)

    def totals(self) -> tuple[int | None, int | None]:
        """What the worker records as its offer for the reviewer (None: unknown or no limit)."""
        if self.cached is None:
            return None, None
        _, total = self.cached
        return (
            None if total.cpu >= UNLIMITED else total.cpu,
            None if total.memory >= UNLIMITED else total.memory,
        )
