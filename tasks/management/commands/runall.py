"""`manage.py runall`: the API, a scheduler, a worker and a reviewer in one supervised group."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

logger = logging.getLogger(__name__)

GUNICORN_CONF = Path(settings.BASE_DIR) / "scheduler_project" / "gunicorn_conf.py"


class Command(BaseCommand):
    help = "Run every role at once (quick start and small installs); Ctrl-C stops them all."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--bind", default="127.0.0.1:8000", help="API address")
        parser.add_argument("--concurrency", type=int, default=4, help="worker slots")
        parser.add_argument(
            "--api-workers", type=int, help="gunicorn workers (default: gunicorn_conf.py's)"
        )
        parser.add_argument("--no-api", action="store_true", help="background roles only")

    def handle(self, *args: Any, **options: Any) -> None:
        manage = [sys.executable, os.path.abspath(sys.argv[0])]
        roles: dict[str, list[str]] = {}
        if not options["no_api"]:
            # The production settings (gthread workers, multiprocess request metrics, timeouts),
            # on this address.
            api = [sys.executable, "-m", "gunicorn", "-c", str(GUNICORN_CONF)]
            api += ["--bind", options["bind"]]
            if options["api_workers"]:
                api += ["--workers", str(options["api_workers"])]
            roles["api"] = [*api, "scheduler_project.wsgi"]
        roles["scheduler"] = [*manage, "runscheduler"]
        roles["worker"] = [*manage, "runworker", "--concurrency", str(options["concurrency"])]
        roles["reviewer"] = [*manage, "runreviewer"]

        stopping = False

        def stop(signum: int, frame: object) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        children = {name: self._start(name, cmd) for name, cmd in roles.items()}
        if not options["no_api"]:
            self.stdout.write(
                f"API on http://{options['bind']}/  (docs: /api/docs/, admin: /admin/)"
            )
        restarts: dict[str, float] = {}
        parent = os.getppid()
        while not stopping:
            time.sleep(0.5)
            if os.getppid() != parent:
                # Whatever started us is gone (`make run` killed alone): stop like on SIGTERM
                # rather than live on, reparented to init, holding the port and the database.
                logger.warning("parent process %d exited; stopping every role", parent)
                break
            for name, child in list(children.items()):
                if child.poll() is not None and not stopping:
                    # A crashed role is restarted, at most once every 5 seconds.
                    if time.monotonic() - restarts.get(name, 0.0) < 5:
                        continue
                    logger.warning("%s exited with %s; restarting", name, child.returncode)
                    restarts[name] = time.monotonic()
                    children[name] = self._start(name, roles[name])
        self._stop_all(children)

    def _start(self, name: str, cmd: list[str]) -> subprocess.Popen:
        logger.info("starting %s", name)
        # Own process group: Ctrl-C reaches runall once, and runall stops each role in turn.
        return subprocess.Popen(cmd, start_new_session=True)

    def _stop_all(self, children: dict[str, subprocess.Popen]) -> None:
        for child in children.values():
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 40
        for name, child in children.items():
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                logger.warning("%s did not stop in time; killing it", name)
                child.kill()
                child.wait()
        self.stdout.write("all roles stopped")
