"""`manage.py runworker --concurrency N [--cpu Q] [--memory Q] [--executor kubernetes]`: claim
due runs, execute them."""

from __future__ import annotations

import gc
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from tasks import resources
from tasks.loop import install_stop_signals
from tasks.worker.worker import Worker

logger = logging.getLogger(__name__)


class Command(BaseCommand):
    help = "Run a worker with N concurrent payload slots; any number may run at once."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--concurrency", type=int, default=4, help="payloads run at once")
        parser.add_argument("--once", action="store_true", help="claim once, finish, exit")
        parser.add_argument(
            "--executor",
            choices=("local", "kubernetes"),
            default="local",
            help="where executables run: here (sandboxed) or as Kubernetes Jobs",
        )
        # Capacity: runs are claimed only while their requests fit what is free of it.
        parser.add_argument(
            "--cpu",
            default=os.environ.get("SCHEDULER_WORKER_CPU", ""),
            help="CPU this worker offers, a Kubernetes quantity (2, 1500m); default no limit",
        )
        parser.add_argument(
            "--memory",
            default=os.environ.get("SCHEDULER_WORKER_MEMORY", ""),
            help="memory this worker offers, a Kubernetes quantity (4Gi); default no limit",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["concurrency"] < 1:
            raise CommandError("--concurrency must be at least 1")
        cpu = _quantity("--cpu", options["cpu"], resources.cpu_millis)
        memory = _quantity("--memory", options["memory"], resources.memory_bytes)
        kept_connections()
        generic_plans()
        stop = threading.Event()
        install_stop_signals(stop)
        if options["executor"] == "kubernetes":
            if cpu is not None or memory is not None:
                raise CommandError(
                    "--cpu/--memory: the Kubernetes executor offers the "
                    "cluster's quota, not a worker's capacity"
                )
            # The kubernetes client only where it is used.
            from tasks.worker.k8s_worker import KubernetesWorker

            worker: Worker = KubernetesWorker(concurrency=options["concurrency"])
        else:
            worker = Worker(concurrency=options["concurrency"], cpu_millis=cpu, memory_bytes=memory)
        # Everything imported so far lives as long as the process: keep it out of the garbage
        # collector's scans, which otherwise pause every thread (and delay starts) now and then.
        gc.freeze()
        logger.info(
            "worker started as %s concurrency=%d executor=%s cpu=%s memory=%s",
            worker.name,
            worker.concurrency,
            options["executor"],
            options["cpu"] or "unlimited",
            options["memory"] or "unlimited",
        )
        worker.serve(stop, once=options["once"])
        logger.info("worker %s stopped after %d runs", worker.name, worker.finished_count)
        # The pool was shut down without waiting: its idle threads are waking up to exit now.
        executors = [t for t in threading.enumerate() if t.name.startswith("executor")]
        deadline = time.monotonic() + 2.0
        for thread in executors:
            thread.join(max(0.0, deadline - time.monotonic()))
        stuck = [t for t in executors if t.is_alive()]
        if stuck:
            # A handler past the grace period cannot be interrupted, and its run is already
            # released to another worker: end the process now rather than wait for the thread,
            # so two copies never run at once.
            logger.warning("exiting with %d payload thread(s) still running", len(stuck))
            logging.shutdown()
            os._exit(0)


def _quantity(flag: str, text: str, measure: Callable[[str], int]) -> int | None:
    """`text` (a Kubernetes quantity) as millicores or bytes; None when empty (no limit)."""
    if not text.strip():
        return None
    try:
        return measure(text.strip())
    except resources.QuantityError as exc:
        raise CommandError(f"{flag} {text!r}: {exc}") from None


def kept_connections() -> None:
    """The worker keeps its connections while they work, instead of renewing them every
    DATABASE_CONN_MAX_AGE (which, when set, still decides). Each new connection prepares and
    plans every variant of the claim and the cycle again (one per batch size and typing of its
    parameters, about 30 a worker): renewed every minute, that was most of the cycle's plans
    (bench/NOTEBOOK.md, "Planned once per connection"). The age limit serves the API's reads
    from a standby; a worker's connection is to the primary, and one to a server that turned
    read-only is dropped anyway (scheduler_project/postgresql/base.py). Called before
    generic_plans, which closes the connections opened so far."""
    if "DATABASE_CONN_MAX_AGE" in os.environ:
        return
    for alias in connections:
        connections[alias].settings_dict["CONN_MAX_AGE"] = None
    connections.close_all()  # a connection opened before (the checks) would keep its age


def generic_plans() -> None:
    """The worker's connections keep one generic plan per prepared statement, as the API's do
    (DATABASE_PLAN_CACHE_MODE, when set, still decides). Its claim and cycle statements are
    prepared per connection (tasks/db.py), one per batch size, and the connection is renewed
    every DATABASE_CONN_MAX_AGE: with `auto` each renewal planned every one of them five times
    before PostgreSQL settled on the generic plan it then kept, at about 20 ms a plan in `bench
    day` (bench/NOTEBOOK.md, "The worker's cycle planned again at every reconnection; the day's
    daily tasks at one instant")."""
    if "DATABASE_PLAN_CACHE_MODE" in os.environ:
        return
    for alias in connections:  # every thread's connections are made from these settings
        connections[alias].settings_dict["PLAN_CACHE_MODE"] = "force_generic_plan"
    connections.close_all()  # a connection opened before (the checks) would keep `auto`
