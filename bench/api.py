"""API latency: gunicorn as the Dockerfile runs it, with a scheduler and a
worker running, measured against a floor served in the same run.

The floor is a trivial authenticated endpoint (`/bench/floor`: the JWT checked, `{}` returned)
served by the same gunicorn through the same middleware and DRF stack (bench/floor.py). Every
figure is also given as a ratio to it, so that a slow hour and a fast one can be compared.

1. Service time, one request at a time: each endpoint and the floor, interleaved, median of
   `repeat`; the ratio to the floor (targets: task < 2.5x, a task's runs < 3x, list page < 5x).
2. Saturated throughput: `SATURATION_CLIENTS` clients sending back to back for a few seconds,
   the read mix and then the floor; requests/s and their ratio.
3. Open loop: a second process sends `rate` reads/s (20 % task list pages, 40 % single tasks,
   20 % a task's runs, 20 % single runs) plus `writes` creates/s (one-time tasks due 1 s later,
   which the scheduler and the worker run) for `seconds`. Requests leave on a fixed timetable
   from a thread pool and each latency is measured from its *intended* send time, so a slow
   server is not hidden by the client sending less (no coordinated omission). Targets:
   p95 < 25 ms, p99 < 100 ms, no errors.
"""

from __future__ import annotations

import http.client
import json
import multiprocessing as mp
import random
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait

from django.db import connection

from bench import apiserver, proc, workload

P95_TARGET_MS = 25.0
P99_TARGET_MS = 100.0
# The read mix (20 % list pages, 80 % single reads), by weight.
READS = {"task_list": 20, "task_detail": 40, "task_runs": 20, "run_detail": 20}
FLOOR = "floor"
FLOOR_PATH = "/bench/floor"
# The targets for service time one at a time, as a multiple of the floor's
# (docs/benchmarks.md, "API against its floor").
RATIO_TARGETS = {"task_detail": 2.5, "task_runs": 3.0, "task_list": 5.0}
SATURATION_CLIENTS = 8
WARM_READS = 4  # of each list page before the service times (both gunicorn processes see it)
SATURATION_SECONDS = 5.0
USERNAME = "bench-api"
DRAIN_SECONDS = 30.0


def _timetable(rate: float, writes: float, seconds: float, seed: int) -> list[tuple[float, str]]:
    rng = random.Random(seed)
    kinds, weights = list(READS), list(READS.values())
    plan = [(i / rate, rng.choices(kinds, weights)[0]) for i in range(int(rate * seconds))]
    if writes > 0:
        plan += [(i / writes, "create") for i in range(int(writes * seconds))]
    return sorted(plan)


def request_for(
    kind: str,
    rng: random.Random,
    ctx: dict,
    *,
    name: str = "load",
    handler: str = "noop",
    dedup_key: str | None = None,
) -> tuple[str, str, bytes | None]:
    """One request of the mix: a read of `kind` among ctx's tasks and runs, or a create of a
    one-time task `name` running `handler` (with `dedup_key`, a create safe to send again)."""
    tasks, runs = ctx["task_ids"], ctx["run_ids"]
    if kind == FLOOR:
        return "GET", FLOOR_PATH, None
    if kind == "task_list":
        return "GET", f"/api/v1/tasks?page={rng.randint(1, ctx['pages'])}", None
    if kind == "task_detail":
        return "GET", f"/api/v1/tasks/{rng.choice(tasks)}", None
    if kind == "task_runs":
        return "GET", f"/api/v1/tasks/{rng.choice(tasks)}/runs", None
    if kind == "run_detail":
        return "GET", f"/api/v1/runs/{rng.choice(runs)}", None
    body = {
        "kind": "handler",
        "name": name,
        "payload": {"name": handler},
        "schedule": {"type": "once", "delay": 1},
    }
    if dedup_key is not None:
        body["dedup_key"] = dedup_key
    return "POST", "/api/v1/tasks", json.dumps(body).encode()


def _send(port: int, token: str, method: str, path: str, body: bytes | None) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        headers = {"Authorization": f"Bearer {token}"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def _load(ctx: dict, results: mp.Queue) -> None:
    """The load generator (its own process): send the timetable, report every latency."""
    plan = _timetable(ctx["rate"], ctx["writes"], ctx["seconds"], ctx["seed"])
    rng = random.Random(ctx["seed"] + 1)
    samples: list[tuple[str, float, int]] = []
    lock = threading.Lock()
    cpu_before = time.process_time()

    answered: set[int] = set()

    def one(i: int, kind: str, intended: float, request: tuple[str, str, bytes | None]) -> None:
        try:
            status = _send(ctx["port"], ctx["token"], *request)
        except Exception:
            status = 0
        with lock:
            samples.append((kind, (time.perf_counter() - intended) * 1000, status))
            answered.add(i)

    lag = 0.0
    pool = ThreadPoolExecutor(max_workers=ctx["threads"])
    sent: list[tuple[Future, str, float]] = []
    t0 = time.perf_counter() + 0.2
    for i, (offset, kind) in enumerate(plan):
        intended = t0 + offset
        request = request_for(kind, rng, ctx)
        delay = intended - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        else:
            lag = max(lag, -delay)
        sent.append((pool.submit(one, i, kind, intended, request), kind, intended))
    # Bounded: what has not answered DRAIN_SECONDS after the last send counts as an error, with
    # its latency so far (a lower bound) so that an overloaded server shows in the percentiles.
    wait([future for future, _, _ in sent], timeout=DRAIN_SECONDS)
    pool.shutdown(wait=False, cancel_futures=True)
    now = time.perf_counter()
    with lock:
        unfinished = [
            (kind, (now - intended) * 1000, 0)
            for i, (_, kind, intended) in enumerate(sent)
            if i not in answered
        ]
        samples.extend(unfinished)
        report = {"samples": list(samples), "unanswered": len(unfinished)}
    results.put(
        {
            **report,
            "dispatch_lag_ms": round(lag * 1000, 2),
            "loadgen_cpu_seconds": round(time.process_time() - cpu_before, 2),
        }
    )


def _context(server: apiserver.Gunicorn, seeded: apiserver.Seeded) -> dict:
    return {
        "port": server.port,
        "token": apiserver.token_for(USERNAME),
        "task_ids": [str(t) for t in seeded.task_ids],
        "run_ids": [str(r) for r in seeded.run_ids],
        "pages": max(1, len(seeded.task_ids) // 50),
    }


def _in_child(target: Callable, ctx: dict, timeout: float) -> dict:
    connection.close()  # nothing of Django's crosses the fork
    queue = mp.get_context("fork").Queue()
    child = mp.get_context("fork").Process(target=target, args=(ctx, queue))
    child.start()
    try:
        return queue.get(timeout=timeout)
    finally:
        child.join(timeout=30)
        if child.is_alive():
            child.kill()


def run_step(
    server: apiserver.Gunicorn,
    seeded: apiserver.Seeded,
    *,
    rate: float,
    writes: float,
    seconds: float,
    threads: int = 64,
) -> dict:
    """One open-loop load of `seconds`; the figures as a dict (milliseconds)."""
    ctx = {
        **_context(server, seeded),
        "rate": rate,
        "writes": writes,
        "seconds": seconds,
        "seed": int(rate * 1000 + writes),
        "threads": threads,
    }
    server_cpu = server.cpu_seconds()
    started = time.monotonic()
    report = _in_child(_load, ctx, seconds + DRAIN_SECONDS + 60)
    elapsed = time.monotonic() - started
    samples = report["samples"]
    latencies = sorted(ms for _, ms, _ in samples)
    errors = sum(1 for _, _, status in samples if not 200 <= status < 300)
    result = {
        "workload": "api",
        "rate": rate,
        "writes": writes,
        "seconds": seconds,
        "api_workers": server.workers,
        "api_threads": server.threads,
        "requests": len(samples),
        "answered_per_second": round((len(samples) - report["unanswered"]) / elapsed, 1),
        "errors": errors,
        "unanswered": report["unanswered"],
        **_figures(latencies),
        "by_endpoint": {
            kind: _figures(sorted(ms for k, ms, _ in samples if k == kind))
            for kind in (*READS, "create")
        },
        "dispatch_lag_ms": report["dispatch_lag_ms"],
        "loadgen_cpu_seconds": report["loadgen_cpu_seconds"],
        "server_cpu_seconds": round(server.cpu_seconds() - server_cpu, 1),
        "gunicorn_worker_rss_mb": list(server.rss().values()),
        "machine": proc.machine(),
    }
    result["meets_target"] = (
        result["p95_ms"] < P95_TARGET_MS and result["p99_ms"] < P99_TARGET_MS and errors == 0
    )
    return result


def service_times(
    server: apiserver.Gunicorn, seeded: apiserver.Seeded, *, repeat: int = 100
) -> dict:
    """Each read alone, one request at a time (no load), and the floor, interleaved so that a
    change in the machine's speed during the measurement touches every endpoint alike. Warm:
    every list page is read a few times first, so that each gunicorn process has its
    connections' prepared statements and its cache of the tasks' next fire times (what a
    process serving for a while has), and the figures are its steady state."""
    ctx = _context(server, seeded)
    for page in range(1, ctx["pages"] + 1):
        for _ in range(WARM_READS):
            _send(server.port, ctx["token"], "GET", f"/api/v1/tasks?page={page}", None)
    rng = random.Random(3)
    for _ in range(WARM_READS * len(READS)):
        for kind in (FLOOR, *READS):
            _send(server.port, ctx["token"], *request_for(kind, rng, ctx))
    times: dict[str, list[float]] = {kind: [] for kind in (FLOOR, *READS)}
    for _ in range(repeat):
        for kind, found in times.items():
            method, path, body = request_for(kind, rng, ctx)
            started = time.perf_counter()
            status = _send(server.port, ctx["token"], method, path, body)
            found.append((time.perf_counter() - started) * 1000)
            if status != 200:
                raise RuntimeError(f"{path} answered {status}")
    floor = statistics.median(times[FLOOR])
    figures = {}
    for kind, found in times.items():
        median = statistics.median(found)
        figures[kind] = {
            "median_ms": round(median, 2),
            "min_ms": round(min(found), 2),
            "x_floor": round(median / floor, 2),
        }
        if kind in RATIO_TARGETS:
            figures[kind]["target_x_floor"] = RATIO_TARGETS[kind]
    meets = all(figures[k]["x_floor"] < target for k, target in RATIO_TARGETS.items())
    return {
        "workload": "api service time",
        "repeat": repeat,
        "by_endpoint": figures,
        "meets_target": meets,
        "machine": proc.machine(),
    }


def _saturate(ctx: dict, results: mp.Queue) -> None:
    """Closed loop (its own process): `clients` threads send back to back for `seconds`."""
    deadline = time.perf_counter() + ctx["seconds"]
    counts = {"ok": 0, "errors": 0}
    lock = threading.Lock()

    def client(seed: int) -> None:
        rng = random.Random(seed)
        kinds, weights = ctx["kinds"], ctx["weights"]
        while time.perf_counter() < deadline:
            request = request_for(rng.choices(kinds, weights)[0], rng, ctx)
            try:
                ok = _send(ctx["port"], ctx["token"], *request) == 200
            except OSError:
                ok = False
            with lock:
                counts["ok" if ok else "errors"] += 1

    started = time.perf_counter()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(ctx["clients"])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    results.put({**counts, "seconds": time.perf_counter() - started})


def saturation(
    server: apiserver.Gunicorn, seeded: apiserver.Seeded, *, clients: int = SATURATION_CLIENTS
) -> dict:
    """Requests/s answered with `clients` always waiting: the read mix, then the floor."""
    figures = {}
    for name, mix in (("reads", READS), (FLOOR, {FLOOR: 1})):
        ctx = {
            **_context(server, seeded),
            "clients": clients,
            "seconds": SATURATION_SECONDS,
            "kinds": list(mix),
            "weights": list(mix.values()),
        }
        report = _in_child(_saturate, ctx, SATURATION_SECONDS + 60)
        figures[name] = {
            "per_second": round(report["ok"] / report["seconds"], 1),
            "errors": report["errors"],
        }
    ratio = figures["reads"]["per_second"] / max(figures[FLOOR]["per_second"], 0.1)
    return {
        "workload": "api saturated throughput",
        "clients": clients,
        "seconds": SATURATION_SECONDS,
        **figures,
        "reads_x_floor": round(ratio, 3),
        "api_workers": server.workers,
        "api_threads": server.threads,
        "machine": proc.machine(),
    }


def _figures(latencies: list[float]) -> dict:
    return {
        "n": len(latencies),
        "p50_ms": round(proc.percentile(latencies, 50), 2),
        "p95_ms": round(proc.percentile(latencies, 95), 2),
        "p99_ms": round(proc.percentile(latencies, 99), 2),
        "max_ms": round(latencies[-1], 2) if latencies else 0.0,
        "mean_ms": round(sum(latencies) / len(latencies), 2) if latencies else 0.0,
    }


def _next_rate(rate: float, passing: float, failing: float) -> float | None:
    """--find-max: double until a rate misses (halve while none has met), then bisect to within
    a tenth of the first rate."""
    if not failing:
        return (passing or rate) * 2
    if not passing:
        return failing / 2 if failing >= 10 else None
    if failing - passing <= rate / 10:
        return None
    return round((passing + failing) / 2, 1)


def measure(
    *,
    database_url: str,
    rate: float,
    writes: float,
    seconds: float,
    find_max: bool,
    api_workers: int | None,
    api_threads: int | None,
    tasks: int,
    runs_per_task: int,
    teams: int = 0,
    emit: Callable[[dict], None],
    write: Callable[[str], None],
) -> list[dict]:
    """Seed; start gunicorn, a scheduler and a worker; measure the service times against the
    floor, the saturated throughput, then one open-loop step (or step the read rate up until a
    target is missed)."""
    seeded = apiserver.seed(
        username=USERNAME, tasks=tasks, runs_per_task=runs_per_task, teams=teams
    )
    shared = f", half of them in {teams} teams the reader edits" if teams else ""
    write(f"seeded {tasks} tasks, {tasks * runs_per_task} runs{shared} in {seeded.seconds} s")
    run_dir = tempfile.mkdtemp(prefix="bench-api-")
    server = apiserver.Gunicorn(database_url, api_workers, run_dir, threads=api_threads)
    fleet = workload.Fleet(run_dir, workload.fleet_env(run_dir, database_url))
    results: list[dict] = []
    try:
        server.start()
        fleet.start("runscheduler")
        fleet.start("runworker", "--concurrency", "4")
        alone = service_times(server, seeded)
        emit(alone)
        write(
            "one request at a time (median, x floor): "
            + ", ".join(
                f"{kind} {f['median_ms']} ms {f['x_floor']}x"
                for kind, f in alone["by_endpoint"].items()
            )
        )
        saturated = saturation(server, seeded)
        emit(saturated)
        write(
            f"saturated ({saturated['clients']} clients): reads "
            f"{saturated['reads']['per_second']}/s, floor {saturated[FLOOR]['per_second']}/s, "
            f"reads/floor {saturated['reads_x_floor']}"
        )
        passing, failing = 0.0, 0.0  # the highest rate that met the targets, the lowest missed
        step = rate
        while True:
            result = run_step(server, seeded, rate=step, writes=writes, seconds=seconds)
            emit(result)
            results.append(result)
            write(_line(result))
            if not find_max:
                break
            if result["meets_target"]:
                passing = step
            else:
                failing = step
            step = _next_rate(rate, passing, failing)
            if step is None:
                break
    finally:
        fleet.stop()
        server.stop()
        shutil.rmtree(run_dir, ignore_errors=True)
    if find_max:
        passing = [r["rate"] for r in results if r["meets_target"]]
        best = max(passing) if passing else None
        summary = {
            "workload": "api max rate",
            "max_read_rate_meeting_target": best,
            "writes": writes,
            "api_workers": server.workers,
        }
        emit(summary)
        write(
            f"highest read rate meeting p95 < {P95_TARGET_MS:g} ms and p99 < "
            f"{P99_TARGET_MS:g} ms: {best} reads/s (+ {writes:g} writes/s)"
        )
    return results


def _line(r: dict) -> str:
    head = (
        f"api {r['rate']:g} reads/s + {r['writes']:g} creates/s, {r['api_workers']} workers"
        f" x {r['api_threads'] or 1} threads: "
        f"p50 {r['p50_ms']} / p95 {r['p95_ms']} / p99 {r['p99_ms']} / max {r['max_ms']} ms, "
        f"{r['errors']} errors, {r['answered_per_second']} answered/s, "
        f"{'meets' if r['meets_target'] else 'MISSES'} the target"
    )
    rows = [
        f"  {kind:<12} n={f['n']:<6} p50 {f['p50_ms']:>7} p95 {f['p95_ms']:>7} "
        f"p99 {f['p99_ms']:>7} max {f['max_ms']:>7} ms"
        for kind, f in r["by_endpoint"].items()
    ]
    return "\n".join([head, *rows])
