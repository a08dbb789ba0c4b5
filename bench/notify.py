"""`python -m bench notify --runs 200`: latency from a run's finish to its webhook's arrival."""

from __future__ import annotations

import json
import secrets
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model

from bench import BenchError
from bench.webhook import Receiver, Roles, percentile
from notifications import services as notification_services
from notifications.models import Notification
from tasks import schedules
from tasks.db import db_now
from tasks.models import Run
from tasks.transitions import creation


class NotifyBench:
    """Starts real worker processes (their delivery threads deliver) and a scheduler, a local
    webhook receiver verifying signatures, then N one-time no-op tasks due `--spacing` apart
    with a `succeeded` webhook each, so workers are idle when each run finishes. Prints
    percentiles of arrival time (receiver clock) minus the run's finished_at (database clock;
    the same host, so the same clock). Creates its own user and deletes it afterwards."""

    def __init__(self, write: Callable[[str], None]) -> None:
        self.write = write

    def handle(self, **options: Any) -> None:
        if options["runs"] < 1 or options["workers"] < 1:
            raise BenchError("--runs and --workers must be at least 1")
        secret = secrets.token_urlsafe(24)
        owner = get_user_model().objects.create(username=f"benchnotify-{secrets.token_hex(4)}")
        logdir = Path(tempfile.mkdtemp(prefix="benchnotify-"))
        roles = Roles(logdir)
        done = False
        try:
            with Receiver(secret) as receiver:
                channel = notification_services.create_channel(
                    owner=owner,
                    data={"kind": "webhook", "config": {"url": receiver.url, "secret": secret}},
                )
                roles.start("runscheduler")
                for _ in range(options["workers"]):
                    roles.start("runworker", "--concurrency", str(options["concurrency"]))
                self._warm_up(owner, channel, receiver, roles)
                started = time.monotonic()
                self._create(owner, channel, options["runs"], options["spacing"])
                self._wait(receiver, options["runs"] + 1, options["timeout"])
                elapsed = time.monotonic() - started
                self._report(owner, receiver, options, elapsed)
                done = True
        finally:
            roles.stop_all()
            if not options["keep"]:
                owner.delete()  # cascades to its tasks, runs, channel and notifications
            if done and not options["keep"]:
                shutil.rmtree(logdir, ignore_errors=True)
            else:
                print(f"role logs in {logdir}", file=sys.stderr)

    def _warm_up(self, owner: Any, channel: Any, receiver: Receiver, roles: Roles) -> None:
        """One run end to end, so workers and their delivery threads are up and idle."""
        self._create(owner, channel, 1, 0.0, delay=0.5, label="warm-up")
        self._wait(receiver, 1, 60.0, roles=roles)
        time.sleep(1.0)

    def _create(
        self,
        owner: Any,
        channel: Any,
        runs: int,
        spacing: float,
        delay: float = 3.0,
        label: str = "run",
    ) -> None:
        now = db_now()
        first = now + timedelta(seconds=delay + runs * 0.01)  # after the creates are done
        notify = [{"channel": str(channel.id), "events": ["succeeded"]}]
        for i in range(runs):
            at = first + timedelta(seconds=i * spacing)
            schedule = schedules.normalize({"type": "once", "run_at": at.isoformat()}, now=now)
            data = {
                "kind": "handler",
                "payload": {"name": "noop", "args": {}},
                "schedule": schedule,
                "notify": notify,
                "name": f"benchnotify {label} {i}",
            }
            creation.create_task(owner=owner, data=data, now=db_now())

    def _wait(
        self, receiver: Receiver, count: int, timeout: float, roles: Roles | None = None
    ) -> None:
        deadline = time.monotonic() + timeout
        while receiver.count() < count:
            if time.monotonic() > deadline:
                raise BenchError(
                    f"only {receiver.count()} of {count} notifications arrived in {timeout:g}s"
                )
            if roles and any(p.poll() is not None for p in roles.procs):
                raise BenchError(f"a role process exited; logs in {roles.logdir}")
            time.sleep(0.05)

    def _report(self, owner: Any, receiver: Receiver, options: dict, elapsed: float) -> None:
        measured = Notification.objects.filter(task__owner=owner).exclude(
            task__name__contains="warm-up"
        )
        finished = dict(Run.objects.filter(owner=owner).values_list("id", "finished_at"))
        latencies = []
        for notification_id, run_id in measured.values_list("id", "run_id"):
            arrivals = receiver.arrivals.get(str(notification_id))
            if arrivals:
                latencies.append(arrivals[0] - finished[run_id].timestamp())
        duplicates = sum(len(a) - 1 for a in receiver.arrivals.values())
        missing = options["runs"] - len(latencies)

        figures = {
            "runs": options["runs"],
            "workers": options["workers"],
            "concurrency": options["concurrency"],
            "spacing_ms": options["spacing"] * 1000,
            "p50_ms": percentile(latencies, 50) * 1000,
            "p90_ms": percentile(latencies, 90) * 1000,
            "p99_ms": percentile(latencies, 99) * 1000,
            "max_ms": max(latencies, default=float("nan")) * 1000,
            "min_ms": min(latencies, default=float("nan")) * 1000,
            "missing": missing,
            "duplicates": duplicates,
            "bad_signatures": receiver.unverified,
        }
        if options["json"]:
            self.write(json.dumps(figures))
            return

        def ms(value: float) -> str:
            return f"{value * 1000:.0f} ms"

        self.write(
            f"benchnotify: {len(latencies)} runs, {options['workers']} workers x "
            f"{options['concurrency']} slots, one run every {options['spacing'] * 1000:g} ms "
            f"({elapsed:.1f} s)\n"
            f"run finished -> webhook arrived: p50 {ms(percentile(latencies, 50))}, "
            f"p90 {ms(percentile(latencies, 90))}, p99 {ms(percentile(latencies, 99))}, "
            f"max {ms(max(latencies))}, min {ms(min(latencies))}\n"
            f"missing {missing}, duplicates {duplicates}, bad signatures {receiver.unverified}"
        )
