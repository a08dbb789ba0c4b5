"""The API load of `bench day`, in its own process: an open-loop timetable over two API servers.

`reads` per second in bench/api.py's mix (20 % task list pages, 40 % single tasks, 20 % a task's
runs, 20 % single runs), `writes` creates per second (one-time `bench` tasks due 1 s later) and
`floors` requests per second to the trivial endpoint (bench/floor.py), for `seconds`. Requests
leave on a fixed timetable from a thread pool and each latency counts from its intended send
time, so a stalled server is not hidden by the client sending less. Requests alternate between
the two servers and the client is the balancer in front of them (Envoy's `retry_on:
reset,connect-failure`, its retries capped at one) and the application's HTTP client behind it
(urllib3's `Retry(read=1)`, which sends an idempotent request again when its answer broke off): a
refused connection is sent to the other server, and a request that is safe to send twice and
whose connection closed before the end of its answer (reset before any byte, or cut after the
status line, as happens to the requests a gunicorn worker had accepted when it is SIGKILLed) is
sent once more to the other server; its latency still counts from its intended send time. Reads
are safe to send twice, and so is every create: each carries its own `dedup_key`, so a second
send answers 200 with the task the first one made, or makes it if the first one did not commit.

Each sample says why a request had no answer (`FAILURES`), and whether it was retried.
"""

from __future__ import annotations

import http.client
import json
import multiprocessing as mp
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait

from bench.api import READS, request_for

TIMEOUT = 30.0
# Why a request has no answer (status 0); "" when it has one.
REFUSED = "refused"  # every server refused the connection
RESET = "reset"  # reset or closed before any byte of an answer
TIMEOUT_ = "timeout"  # the client's TIMEOUT passed without an answer
UNSENT = "unsent"  # still waiting for a thread of the pool (or in flight) when the run ended
CUT = "cut"  # the answer began, then its connection closed before its end
OTHER = "other"  # anything else (a malformed answer)
FAILURES = (REFUSED, RESET, TIMEOUT_, UNSENT, CUT, OTHER)
# Closed before any byte of an answer: what a balancer may retry for an idempotent method.
_RESETS = (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected)


def timetable(
    reads: float, writes: float, floors: float, seconds: float, seed: int
) -> list[tuple[float, str]]:
    rng = random.Random(seed)
    kinds, weights = list(READS), list(READS.values())
    plan = [(i / reads, rng.choices(kinds, weights)[0]) for i in range(int(reads * seconds))]
    plan += [(i / writes, "create") for i in range(int(writes * seconds))]
    plan += [(i / floors + 0.5 / floors, "floor") for i in range(int(floors * seconds))]
    return sorted(plan)


def _request(kind: str, rng: random.Random, ctx: dict, i: int) -> tuple[str, str, bytes | None]:
    # The `bench` handler records its idempotency key, so a body run twice shows; the dedup key
    # makes the create safe to send again.
    dedup_key = f"day-{ctx['seed']}-{i}"
    return request_for(kind, rng, ctx, name="day create", handler="bench", dedup_key=dedup_key)


class AnswerCut(Exception):
    """The status line came, the rest did not: the serving process died mid-answer. Not what a
    balancer retries (a proxy has passed the status on by then), but what the client's own retry
    sends again when the request is safe to send twice."""


def _send(
    port: int, token: str, method: str, path: str, body: bytes | None
) -> tuple[int, str | None]:
    """(status, the created task's id for a create's 201, or its 200 for a repeated dedup key)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    try:
        headers = {"Authorization": f"Bearer {token}"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        try:
            data = response.read()
        except (OSError, http.client.HTTPException) as error:
            raise AnswerCut(response.status) from error
        created = None
        if method == "POST" and response.status in (200, 201):
            created = json.loads(data).get("id")
        return response.status, created
    finally:
        conn.close()


def failure(error: Exception) -> str:
    """Why a request that raised `error` has no answer (one of FAILURES)."""
    if isinstance(error, ConnectionRefusedError):
        return REFUSED
    if isinstance(error, AnswerCut):
        return CUT
    if isinstance(error, _RESETS):
        return RESET
    if isinstance(error, TimeoutError):
        return TIMEOUT_
    return OTHER


def send_balanced(
    ports: list[int], first: int, safe_twice: bool, send: Callable[[int], tuple[int, str | None]]
) -> tuple[int, str | None, str, bool]:
    """(status, created id, failure, retried): `send` to ports[first], as a balancer and the
    client's retry would.

    A refused connection goes to the next server; a request `safe_twice` (a read, or a create
    with its dedup key) whose answer was reset or cut is sent once to the next server (retried);
    any other is never sent twice.
    """
    retried = False
    for attempt in range(len(ports)):
        port = ports[(first + attempt) % len(ports)]
        try:
            status, created = send(port)
            return status, created, "", retried
        except Exception as error:
            why = failure(error)
            if why == REFUSED:
                continue  # down: the balancer sends it to the other server
            again = why in (RESET, CUT) and safe_twice and not retried
            if again and attempt + 1 < len(ports):
                retried = True
                continue
            return 0, None, why, retried
    return 0, None, REFUSED, retried


def run(ctx: dict, results: mp.Queue) -> None:
    """Send the timetable; put every sample (kind, intended wall time, ms, status, task id,
    failure, retried, ms it waited for a thread of this pool: the client's own queue, which an
    open-loop client with `threads` threads builds once requests take longer on average than
    threads / rate seconds)."""
    plan = timetable(ctx["reads"], ctx["writes"], ctx["floors"], ctx["seconds"], ctx["seed"])
    rng = random.Random(ctx["seed"] + 1)
    ports: list[int] = ctx["ports"]
    samples: list[tuple[str, float, float, int, str | None, str, bool, float]] = []
    lock = threading.Lock()
    answered: set[int] = set()
    taken_up: dict[int, float] = {}  # when a thread of the pool took each request up

    def one(i: int, kind: str, intended: float, wall: float, request: tuple) -> None:
        taken = time.perf_counter()
        with lock:
            taken_up[i] = taken
        # Every request of the day is safe to send twice: reads, and creates with a dedup key.
        status, created, why, retried = send_balanced(
            ports, i, True, lambda port: _send(port, ctx["token"], *request)
        )
        ms = (time.perf_counter() - intended) * 1000
        with lock:
            pool_ms = (taken - intended) * 1000
            samples.append((kind, wall, ms, status, created, why, retried, pool_ms))
            answered.add(i)

    pool = ThreadPoolExecutor(max_workers=ctx["threads"])
    sent: list[tuple[Future, str, float, float]] = []
    t0, wall0 = time.perf_counter() + 0.2, time.time() + 0.2
    for i, (offset, kind) in enumerate(plan):
        intended = t0 + offset
        request = _request(kind, rng, ctx, i)
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
                ms = (now - intended) * 1000
                pool_ms = (taken_up[i] - intended) * 1000 if i in taken_up else ms
                samples.append((kind, wall, ms, 0, None, UNSENT, False, pool_ms))
        results.put(list(samples))
