"""The worker of `runworker --executor kubernetes`: executables as Jobs, admitted by free quota.

The same loop as every worker (tasks/worker/worker.py); what differs is the claim, which takes
only the runs the cluster's free capacity admits (k8s_admission.py), and the executor, which
makes and follows one Job per attempt (k8s.py). `--concurrency` is the most Jobs in flight.
"""

from __future__ import annotations

import functools
import logging

from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError

from tasks.transitions import claim
from tasks.worker import k8s
from tasks.worker.k8s_admission import QuotaAdmission
from tasks.worker.worker import Worker

logger = logging.getLogger("tasks.worker")


class KubernetesWorker(Worker):
    def __init__(self, *, concurrency: int, name: str | None = None) -> None:
        self.admission = QuotaAdmission()
        super().__init__(
            concurrency=concurrency,
            name=name,
            executor=functools.partial(k8s.execute, admission=self.admission),
        )
        self.max_ahead = 0  # a claimed run is a Job about to be made: hold none ahead

    def find_sandbox(self) -> tuple[str, str]:
        return "kubernetes", ""  # executables run as Jobs, not on this host

    def _record_and_claim(
        self, batch: list[claim.Outcome], free: int
    ) -> tuple[list[tuple], list[claim.ClaimedRun]]:
        recorded = claim.record_outcomes(worker=self.name, outcomes=batch) if batch else []
        try:
            claimed = self.admission.claim(worker=self.name, slots=free, prefetch=self.prefetch)
        except (ApiException, HTTPError, OSError) as exc:  # the cluster, not the database
            logger.warning("cannot read the cluster's capacity (%s); claiming nothing", exc)
            claimed = []
        return recorded, claimed
