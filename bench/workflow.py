"""`python -m bench workflow`: workflows against plain runs, with real worker processes.

Three figures, each beside its floor from the same run (docs/benchmarks.md, "Workflows"):

- **fan-out/fan-in**: a workflow `root`; `c0` ... `c<N-1>` after `root`; `join` after every
  child. The children's rate (N / last child's end - first child's start) against N
  independent one-time runs due now on the same workers (the same formula);
- **the join**: its start after the last child's end (the release is the transaction that
  records that end);
- **a hand-off on idle workers**: `a` then `b`, one workflow run at a time; `b`'s start after
  `a`'s end, p50 / p99, against a one-time run made due now on the same idle workers (its start
  after its creation: the wake-up path alone).

Every body is the `bench` handler (bench/handlers.py), which writes a line and touches nothing.
Workflows are made and started through the API (in-process, Django's test client), as users do.
"""

from __future__ import annotations

import json
import tempfile
import time
from datetime import UTC, datetime
from typing import Any

from django.db import connection
from django.test import Client
from rest_framework_simplejwt.tokens import RefreshToken

from bench import BenchError
from bench.proc import percentile
from bench.workload import Fleet, bench_owner, enqueue, fleet_env, layout, reset_queue

BODY = {"kind": "handler", "payload": {"name": "bench", "args": {}}, "priority": 5}


def _api() -> Client:
    token = str(RefreshToken.for_user(bench_owner()).access_token)
    return Client(HTTP_HOST="127.0.0.1", HTTP_AUTHORIZATION=f"Bearer {token}")


def _post(client: Client, path: str, body: dict | None = None) -> dict:
    response = client.post(path, json.dumps(body or {}), content_type="application/json")
    if response.status_code != 201:
        raise BenchError(f"POST {path}: {response.status_code} {response.content[:300]!r}")
    return response.json()


def _workflow(client: Client, name: str, steps: list[dict]) -> str:
    return _post(client, "/api/v1/workflows", {"name": name, "steps": steps})["id"]


def _one(sql: str, params: list[Any] | None = None) -> tuple:
    with connection.cursor() as cursor:
        cursor.execute(sql, params or [])
        return cursor.fetchone()


def _reset() -> None:
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE tasks_workflowrun, tasks_workflow CASCADE")
    reset_queue()


def _wait(sql: str, params: list[Any], until: Any, *, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while _one(sql, params)[0] != until:
        if time.monotonic() > deadline:
            raise BenchError(f"gave up after {seconds:g} s waiting for: {sql}")
        time.sleep(0.05)


def _window(where: str, params: list[Any]) -> tuple[int, float, float]:
    """(runs succeeded, first start, last end) in epoch seconds, of the runs `where` picks."""
    n, first, last = _one(
        "SELECT count(*) FILTER (WHERE r.status = 'succeeded'),"
        " extract(epoch FROM min(r.started_at)), extract(epoch FROM max(r.finished_at))"
        f" FROM tasks_run r JOIN tasks_task t ON t.id = r.task_id WHERE {where}",
        params,
    )
    return n, float(first or 0), float(last or 0)


def _start_fleet(database_url: str, workers: int, processes: int | None) -> Fleet:
    run_dir = tempfile.mkdtemp(prefix="bench-workflow-")
    fleet = Fleet(run_dir, fleet_env(run_dir, database_url))
    procs, concurrency = layout(workers, processes)
    for _ in range(procs):
        fleet.start("runworker", "--concurrency", str(concurrency))
    return fleet


def independent(*, database_url: str, n: int, workers: int, processes: int | None) -> dict:
    """N one-time runs due now, then the workers; rate over first start to last end."""
    _reset()
    now = datetime.now(UTC)
    enqueue([now] * n, now=now)
    fleet = _start_fleet(database_url, workers, processes)
    try:
        _wait("SELECT count(*) FROM tasks_run WHERE status = 'succeeded'", [], n, seconds=300)
    finally:
        fleet.stop()
    done, first, last = _window("true", [])
    return {
        "runs": done,
        "seconds": round(last - first, 3),
        "rate": round(done / (last - first), 1),
    }


def fan_out(*, database_url: str, n: int, workers: int, processes: int | None) -> dict:
    """root -> N children -> join, started before the workers (as the independent runs are)."""
    _reset()
    client = _api()
    children = [f"c{i}" for i in range(n)]
    steps = [
        {"id": "root", "task": BODY},
        *({"id": child, "after": ["root"], "task": BODY} for child in children),
        {"id": "join", "after": children, "task": BODY},
    ]
    made = time.monotonic()
    workflow = _workflow(client, "fan", steps)
    workflow_run = _post(client, f"/api/v1/workflows/{workflow}/run")["id"]
    start_seconds = time.monotonic() - made
    fleet = _start_fleet(database_url, workers, processes)
    try:
        _wait(
            "SELECT status FROM tasks_workflowrun WHERE id = %s",
            [workflow_run],
            "succeeded",
            seconds=300,
        )
    finally:
        fleet.stop()
    done, first, last = _window("t.name LIKE 'fan/c%%'", [])
    (join_start,) = _one(
        "SELECT extract(epoch FROM r.started_at) FROM tasks_run r"
        " JOIN tasks_task t ON t.id = r.task_id WHERE t.name = 'fan/join'"
    )
    return {
        "children": done,
        "create_and_start_seconds": round(start_seconds, 3),
        "seconds": round(last - first, 3),
        "rate": round(done / (last - first), 1),
        "join_after_last_child_ms": round((float(join_start) - last) * 1000, 1),
    }


def hand_off(*, database_url: str, rounds: int, workers: int, processes: int | None) -> dict:
    """On idle workers, in turns: a two-step workflow run (b's start - a's end), and a one-time
    run due now (its start - its creation), `rounds` of each."""
    _reset()
    client = _api()
    pair = _workflow(
        client, "pair", [{"id": "a", "task": BODY}, {"id": "b", "after": ["a"], "task": BODY}]
    )
    fleet = _start_fleet(database_url, workers, processes)
    handoffs: list[float] = []
    wakeups: list[float] = []
    ended = "SELECT count(*) FROM tasks_run WHERE status = 'succeeded'"
    try:
        enqueue([datetime.now(UTC)], now=datetime.now(UTC))  # warm-up: every worker is up
        _wait(ended, [], 1, seconds=60)
        done = 1
        for _ in range(rounds):
            time.sleep(0.2)  # idle: each worker back in its wait
            workflow_run = _post(client, f"/api/v1/workflows/{pair}/run")["id"]
            done += 2
            _wait(ended, [], done, seconds=30)
            (gap,) = _one(
                "SELECT extract(epoch FROM b.started_at - a.finished_at) * 1000"
                " FROM tasks_workflowstep sa JOIN tasks_run a ON a.id = sa.run_id,"
                " tasks_workflowstep sb JOIN tasks_run b ON b.id = sb.run_id"
                " WHERE sa.workflow_run_id = %s AND sa.step_id = 'a'"
                " AND sb.workflow_run_id = %s AND sb.step_id = 'b'",
                [workflow_run, workflow_run],
            )
            handoffs.append(float(gap))
            time.sleep(0.2)
            now = datetime.now(UTC)
            enqueue([now], now=now)
            done += 1
            _wait(ended, [], done, seconds=30)
            (wake,) = _one(
                "SELECT extract(epoch FROM started_at - created_at) * 1000 FROM tasks_run"
                " WHERE status = 'succeeded' ORDER BY finished_at DESC LIMIT 1"
            )
            wakeups.append(float(wake))
    finally:
        fleet.stop()

    def pcts(values: list[float]) -> dict:
        ordered = sorted(values)
        return {
            "p50_ms": round(percentile(ordered, 50), 1),
            "p99_ms": round(percentile(ordered, 99), 1),
            "max_ms": round(ordered[-1], 1),
        }

    return {"rounds": rounds, "hand_off": pcts(handoffs), "floor_one_time_run": pcts(wakeups)}


def measure(
    *, database_url: str, n: int, rounds: int, workers: int, processes: int | None, write: Any
) -> dict:
    plain = independent(database_url=database_url, n=n, workers=workers, processes=processes)
    fan = fan_out(database_url=database_url, n=n, workers=workers, processes=processes)
    pair = hand_off(database_url=database_url, rounds=rounds, workers=workers, processes=processes)
    result = {
        "workload": "workflow",
        "workers": workers,
        "independent": plain,
        "fan_out": fan,
        "children_vs_independent": round(fan["rate"] / plain["rate"], 2),
        **pair,
    }
    write(json.dumps(result))
    write()
    write(f"bench workflow: {n:,} runs, {workers} worker slots")
    write(
        f"  fan-out/fan-in: {fan['children']:,} children at {fan['rate']:,} runs/s;"
        f" {n:,} independent runs (floor) at {plain['rate']:,} runs/s:"
        f" {result['children_vs_independent']}x"
    )
    write(f"  the join started {fan['join_after_last_child_ms']} ms after the last child ended")
    h, f = pair["hand_off"], pair["floor_one_time_run"]
    write(
        f"  hand-off a -> b on idle workers, {rounds} rounds: p50 {h['p50_ms']} / p99"
        f" {h['p99_ms']} / max {h['max_ms']} ms; floor (a one-time run made due now) p50"
        f" {f['p50_ms']} / p99 {f['p99_ms']} / max {f['max_ms']} ms"
    )
    return result
