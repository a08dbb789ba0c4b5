"""`manage.py runworker --concurrency N [--executor kubernetes]`: claim due runs, execute them."""

from __future__ import annotations

import gc
import logging
import os
import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandError

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

    def handle(self, *args: Any, **options: Any) -> None:
        if options["concurrency"] < 1:
            raise CommandError("--concurrency must be at least 1")
        stop = threading.Event()
        install_stop_signals(stop)
        if options["executor"] == "kubernetes":
            # The kubernetes client only where it is used.
            from tasks.worker.k8s_worker import KubernetesWorker

            worker: Worker = KubernetesWorker(concurrency=options["concurrency"])
        else:
            worker = Worker(concurrency=options["concurrency"])
        # Everything imported so far lives as long as the process: keep it out of the garbage
        # collector's scans, which otherwise pause every thread (and delay starts) now and then.
        gc.freeze()
        logger.info("worker started as %s concurrency=%d executor=%s", worker.name,
                    worker.concurrency, options["executor"])  # fmt: skip
        worker.serve(stop, once=options["once"])
        logger.info("worker %s stopped after %d runs", worker.name, worker.finished_count)
        stuck = [t for t in threading.enumerate() if t.name.startswith("executor") and t.is_alive()]
        if stuck:
            # A handler past the grace period cannot be interrupted, and its run is already
            # released to another worker: end the process now rather than wait for the thread,
            # so two copies never run at once.
            logger.warning("exiting with %d payload thread(s) still running", len(stuck))
            logging.shutdown()
            os._exit(0)
