"""`python -m bench batch`: the CPU a one-time task costs when it is created through POST
/api/v1/tasks/batch, against the CPU it costs the workers that execute it, the same tasks in one
run, on a scratch database.

The API side is in-process (the view: parsing, validation, `create_task_rows`): each round posts one
batch of N one-time tasks due now (what a job queue's client sends) and reads this process's CPU
(`time.process_time`), then calls `create_task_rows` (what the route calls) alone on N bodies
validated beforehand; the difference is what parsing and validating a body costs. Its
PostgreSQL backend's CPU is read from /proc around the same calls.

The worker side is real `manage.py runworker` processes, started before the first round and idle
once a warm-up batch is done: each round's window runs from before its POST until its 2 x N runs
(the route's and `create_task_rows`' own) have succeeded, and the workers' CPU (and their PostgreSQL
backends', from /proc) over the window, less what they burn idle over as long (measured before
the rounds), is divided by the runs. The medians of the rounds are printed in CPU-ms per task.

Floors from the same run: a trivial authenticated request through the same client, middleware
and DRF stack (bench/floor.py), and the idle workers' CPU per second.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import override_settings
from rest_framework.test import APIClient, APIRequestFactory

from bench import workload
from bench.proc import cpu_seconds, machine
from tasks.api.serializers import TaskInputSerializer
from tasks.db import db_now
from tasks.transitions.creation import create_task_rows

URL = "/api/v1/tasks/batch"
IDLE_SECONDS = 10.0
FLOOR_REQUESTS = 200


def bodies(n: int) -> list[dict[str, Any]]:
    return [
        {"kind": "handler", "payload": {"name": "noop"}, "schedule": {"type": "once"}}
        for _ in range(n)
    ]


@dataclass
class Round:
    route: float = 0.0  # the API process's CPU seconds for the POST
    route_pg: float = 0.0  # its PostgreSQL backend's
    create: float = 0.0  # `create_task_rows` alone
    create_pg: float = 0.0
    workers: float = 0.0  # the workers' CPU seconds over the window
    workers_pg: float = 0.0  # their backends'
    seconds: float = 0.0


@dataclass
class Backends:
    """The CPU the database's other sessions (the workers') have used, read from /proc: each
    backend's latest reading is kept, so one that ends between two reads loses only its last
    moments, and one that starts counts from zero."""

    own: int
    seen: dict[int, float] = field(default_factory=dict)

    def sample(self) -> float:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND backend_type = 'client backend' AND pid <> %s",
                [self.own],
            )
            for (pid,) in cursor.fetchall():
                self.seen[pid] = max(self.seen.get(pid, 0.0), cpu_seconds(pid))
        return sum(self.seen.values())


def measure(*, n: int, rounds: int, database_url: str, processes: int, concurrency: int) -> None:
    with override_settings(ALLOWED_HOSTS=[*settings.ALLOWED_HOSTS, "testserver"]):
        run_dir = tempfile.mkdtemp(prefix="bench-batch-")
        fleet = workload.Fleet(run_dir, workload.fleet_env(run_dir, database_url))
        try:
            for _ in range(processes):
                fleet.start("runworker", "--concurrency", str(concurrency))
            _measure(n, rounds, fleet, processes, concurrency)
        finally:
            fleet.stop()


def _measure(n: int, rounds: int, fleet: workload.Fleet, processes: int, concurrency: int) -> None:
    print("machine:", machine())
    user, _ = get_user_model().objects.get_or_create(username="bench-batch")
    api = APIClient()
    api.force_authenticate(user)
    request = APIRequestFactory().post(URL)
    request.user = user
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        own = cursor.fetchone()[0]
    backends = Backends(own)

    def workers_cpu() -> tuple[float, float]:
        """The workers' CPU seconds so far, and their backends'."""
        return sum(cpu_seconds(proc.pid) for proc in fleet.procs), backends.sample()

    # Warm-up: one small batch through the route and the workers, so imports, caches and
    # connections are made before anything is measured.
    api.post(URL, {"tasks": bodies(10)}, format="json")
    _drain(10, workers_cpu)
    idle_started, (idle_cpu, idle_pg) = time.monotonic(), workers_cpu()
    time.sleep(IDLE_SECONDS)
    cpu, pg = workers_cpu()
    idle_seconds = time.monotonic() - idle_started
    idle = ((cpu - idle_cpu) / idle_seconds, (pg - idle_pg) / idle_seconds)
    floor = _floor(api)
    done = 10
    results: list[Round] = []
    for _ in range(rounds):
        one = Round()
        window_started, (window_cpu, window_pg) = time.monotonic(), workers_cpu()
        sent = {"tasks": bodies(n)}
        api_pg = cpu_seconds(own)
        started = time.process_time()
        response = api.post(URL, sent, format="json")
        one.route = time.process_time() - started
        one.route_pg = cpu_seconds(own) - api_pg
        assert response.status_code == 201, response.content[:300]
        now = db_now()
        context = {"now": now, "multipart": False, "request": request}
        items = []
        for body in bodies(n):
            serializer = TaskInputSerializer(data=body, context=context)
            serializer.is_valid(raise_exception=True)
            items.append(serializer.validated_data)
        api_pg = cpu_seconds(own)
        started = time.process_time()
        create_task_rows(owner=user, items=items, now=now)
        one.create = time.process_time() - started
        one.create_pg = cpu_seconds(own) - api_pg
        done += 2 * n
        _drain(done, workers_cpu)
        one.seconds = time.monotonic() - window_started
        cpu, pg = workers_cpu()
        one.workers, one.workers_pg = cpu - window_cpu, pg - window_pg
        results.append(one)
    _print(n, rounds, results, floor, idle, processes, concurrency)


def _drain(total: int, workers_cpu: Callable[[], tuple[float, float]]) -> None:
    """Wait until `total` runs have succeeded (reading the workers' CPU meanwhile, so their
    backends' readings stay fresh)."""
    deadline = time.monotonic() + 300
    while True:
        workers_cpu()
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM tasks_run WHERE status = 'succeeded'")
            if cursor.fetchone()[0] >= total:
                return
        assert time.monotonic() < deadline, "the workers did not finish the runs in 300 s"
        time.sleep(0.05)


def _floor(api: APIClient) -> float:
    """A trivial authenticated request's CPU seconds, the median of FLOOR_REQUESTS."""
    spent = []
    with override_settings(ROOT_URLCONF="bench.floor"):
        for _ in range(FLOOR_REQUESTS):
            started = time.process_time()
            response = api.get("/bench/floor")
            spent.append(time.process_time() - started)
            assert response.status_code == 200
    return statistics.median(spent)


def _print(
    n: int,
    rounds: int,
    results: list[Round],
    floor: float,
    idle: tuple[float, float],
    processes: int,
    concurrency: int,
) -> None:
    def ms(value: float, per: int) -> str:
        return f"{1000 * value / per:7.3f}"

    def median(name: str) -> float:
        return statistics.median(getattr(one, name) for one in results)

    route, create = median("route"), median("create")
    print(
        f"{n} one-time tasks per batch, median of {rounds} rounds, CPU-ms per task "
        f"(the process / its PostgreSQL backends):"
    )
    print(f"  {'POST /api/v1/tasks/batch':34} {ms(route, n)} / {ms(median('route_pg'), n)}")
    print(f"  {'  create_task_rows':34} {ms(create, n)} / {ms(median('create_pg'), n)}")
    print(f"  {'  parsing and validation':34} {ms(route - create, n)}")
    runs = 2 * n
    workers, workers_pg = median("workers"), median("workers_pg")
    # What idle workers burn over as long a window (their polls, heartbeats, the LISTEN thread):
    # an upper bound of what the runs did not cost, since busy workers poll less.
    seconds = median("seconds")
    idle_cpu, idle_pg = idle[0] * seconds, idle[1] * seconds
    name = f"runworker x {processes} (--concurrency {concurrency}), per run"
    print(f"  {name:34} {ms(workers, runs)} / {ms(workers_pg, runs)}")
    label = "  less idle over the window"
    print(f"  {label:34} {ms(workers - idle_cpu, runs)} / {ms(workers_pg - idle_pg, runs)}")
    print(f"  window per round: {seconds:.1f} s for {runs} runs")
    print(
        "  the route's CPU per task / the workers' per run: "
        f"{(route / n) / (workers / runs):.2f} ({(route / n) / ((workers - idle_cpu) / runs):.2f}"
        " less idle); with PostgreSQL's: "
        f"{(route + median('route_pg')) / n / ((workers + workers_pg) / runs):.2f}"
    )
    print("floors (same run):")
    print(f"  {'a trivial request (bench/floor.py)':34} {1000 * floor:7.3f} CPU-ms")
    idle_ms = f"{1000 * idle[0]:7.1f} / {1000 * idle[1]:7.1f}"
    print(f"  {'the idle workers / their backends':34} {idle_ms} CPU-ms a second")
    print(f"  the route's CPU per task in trivial requests: {route / n / floor:.2f}")
