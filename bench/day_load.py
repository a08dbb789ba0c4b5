"""The API load of `bench day`, in its own process: an open-loop timetable over two API servers.

`reads` per second in bench/api.py's mix (20 % task list pages, 40 % single tasks, 20 % a task's
runs, 20 % single runs), `writes` creates per second (one-time `bench` tasks due 1 s later) and
`floors` requests per second to the trivial endpoint (bench/floor.py), for `seconds`. Requests
leave on a fixed timetable from a thread pool and each latency counts from its intended send
time, so a stalled server is not hidden by the client sending less. Requests alternate between
the two servers; a refused connection is sent to the other one, as a load balancer's health
check would route around a server that is down.
"""

from __future__ import annotations

import http.client
import json
import multiprocessing as mp
import random
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait

from bench.api import READS, request_for

TIMEOUT = 30.0


def timetable(
    reads: float, writes: float, floors: float, seconds: float, seed: int
) -> list[tuple[float, str]]:
    rng = random.Random(seed)
    kinds, weights = list(READS), list(READS.values())
    plan = [(i / reads, rng.choices(kinds, weights)[0]) for i in range(int(reads * seconds))]
    plan += [(i / writes, "create") for i in range(int(writes * seconds))]
    plan += [(i / floors + 0.5 / floors, "floor") for i in range(int(floors * seconds))]
    return sorted(plan)


def _request(kind: str, rng: random.Random, ctx: dict) -> tuple[str, str, bytes | None]:
    # The `bench` handler records its idempotency key, so a body run twice shows.
    return request_for(kind, rng, ctx, name="day create", handler="bench")


def _send(
    port: int, token: str, method: str, path: str, body: bytes | None
) -> tuple[int, str | None]:
    """(status, the created task's id for a 201)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    try:
        headers = {"Authorization": f"Bearer {token}"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        data = response.read()
        created = None
        if response.status == 201:
            created = json.loads(data).get("id")
        return response.status, created
    finally:
        conn.close()


def run(ctx: dict, results: mp.Queue) -> None:
    """Send the timetable; put every sample (kind, intended wall time, ms, status, task id)."""
    plan = timetable(ctx["reads"], ctx["writes"], ctx["floors"], ctx["seconds"], ctx["seed"])
    rng = random.Random(ctx["seed"] + 1)
    ports: list[int] = ctx["ports"]
    samples: list[tuple[str, float, float, int, str | None]] = []
    lock = threading.Lock()
    answered: set[int] = set()

    def one(i: int, kind: str, intended: float, wall: float, request: tuple) -> None:
        status, created = 0, None
        for attempt in range(len(ports)):
            port = ports[(i + attempt) % len(ports)]
            try:
                status, created = _send(port, ctx["token"], *request)
                break
            except ConnectionRefusedError:
                continue  # down: the balancer sends it to the other server
            except Exception:
                break  # reset, timed out: the request failed
        with lock:
            samples.append((kind, wall, (time.perf_counter() - intended) * 1000, status, created))
            answered.add(i)

    pool = ThreadPoolExecutor(max_workers=ctx["threads"])
    sent: list[tuple[Future, str, float, float]] = []
    t0, wall0 = time.perf_counter() + 0.2, time.time() + 0.2
    for i, (offset, kind) in enumerate(plan):
        intended = t0 + offset
        request = _request(kind, rng, ctx)
        delay = intended - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        future = pool.submit(one, i, kind, intended, wall0 + offset, request)
        sent.append((future, kind, intended, wall0 + offset))
    wait([future for future, _, _, _ in sent], timeout=TIMEOUT + 5)
    pool.shutdown(wait=False, cancel_futures=True)
    now = time.perf_counter()
    with lock:
        for i, (_, kind, intended, wall) in enumerate(sent):
            if i not in answered:  # never answered: an error, with its latency so far
                samples.append((kind, wall, (now - intended) * 1000, 0, None))
        results.put(list(samples))
