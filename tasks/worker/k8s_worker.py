"""The worker of `runworker --executor kubernetes`: executables as Jobs, claimed within the
namespace's free capacity.

The same loop and the same claim as every worker (tasks/worker/worker.py,
tasks/transitions/claim.py); what differs is the capacity it offers, the namespace's
(k8s_capacity.py) instead of `--cpu/--memory`, and the executor, which makes and follows one
Job per attempt (k8s_executor.py). `--concurrency` is the most Jobs in flight.
"""

from __future__ import annotations

import functools
import logging

from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError

from tasks.transitions import claim
from tasks.worker import k8s_executor
from tasks.worker.k8s_capacity import NamespaceCapacity
from tasks.worker.worker import Worker

logger = logging.getLogger("tasks.worker")


class KubernetesWorker(Worker):
    def __init__(self, *, concurrency: int, name: str | None = None) -> None:
        self.namespace = NamespaceCapacity()
        super().__init__(
            concurrency=concurrency,
            name=name,
            executor=functools.partial(k8s_executor.execute, admission=self.namespace),
        )
        self.max_ahead = 0  # a claimed run is a Job about to be made: hold none ahead

    def find_sandbox(self) -> tuple[str, str]:
        return "kubernetes", ""  # executables run as Jobs, not on this host

    def _record_and_claim(
        self, batch: list[claim.Outcome], free: int
    ) -> tuple[list[tuple], list[claim.ClaimedRun]]:
        try:
            self.namespace.refresh()
        except (ApiException, HTTPError, OSError) as exc:  # the cluster, not the database
            logger.warning("cannot read the cluster's capacity (%s); claiming nothing", exc)
            free = 0
        # The reviewer judges "fits no live worker" by what each worker records it offers.
        self.watch.offers = self.namespace.totals()
        return super()._record_and_claim(batch, free)

    def budget(self) -> claim.Capacity:
        """The namespace's capacity, less the requests of held runs the quota does not count
        yet (tasks/worker/k8s_capacity.py)."""
        with self.lock:
            held = [f.run for f in self.inflight.values()]
        return self.namespace.offer(held)
