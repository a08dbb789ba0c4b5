"""The profile of `bench day`: PostgreSQL's time per statement family and each role's CPU, per run
executed and per API request (docs/benchmarks.md, "A production day, with faults").

Every node of the rig loads `pg_stat_statements` (`PARAMETERS`, with planning tracked); the
counters are reset on every node at the window's start and read from every node every few
seconds (`StatementLedger`), so that a node that crashes in the window keeps what it had counted
until its last sample, and one that restarts counts again from zero. A statement's time is its
`total_exec_time + total_plan_time` (top-level statements only, so a trigger's time is its
statement's), summed over the nodes: the leader's writes and the standbys' reads together. The
families are bench/statement_families.py's. Time in the executor is not only CPU: a statement
waiting for a lock or for the synchronous standby counts its wait too.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import psycopg

from bench.statement_families import family

PARAMETERS = {
    "shared_preload_libraries": "pg_stat_statements",
    "pg_stat_statements.track_planning": "on",
    "pg_stat_statements.max": "5000",
}
READ = (
    "SELECT queryid, calls, plans, total_exec_time, total_plan_time FROM pg_stat_statements(false)"
    " WHERE toplevel AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"
)
TEXTS = "SELECT queryid, query FROM pg_stat_statements WHERE toplevel AND queryid = ANY(%s)"


@dataclass
class Statement:
    text: str
    calls: int = 0
    plans: int = 0
    exec_ms: float = 0.0
    plan_ms: float = 0.0


class StatementLedger(threading.Thread):
    """pg_stat_statements of every node, sampled every EVERY seconds from `reset()` until
    `stopping` is set (then sampled once more)."""

    EVERY = 10.0

    def __init__(self, dsns: Callable[[], dict[str, str]], database: str) -> None:
        super().__init__(daemon=True)
        self.dsns, self.database = dsns, database
        self.stopping = threading.Event()
        self.texts: dict[int, str] = {}
        # (node, postmaster start): {queryid: (calls, plans, exec ms, plan ms)}, the last sample
        self.seen: dict[tuple[str, str], dict[int, tuple[int, int, float, float]]] = {}
        self.errors = 0

    def _connect(self, dsn: str) -> psycopg.Connection:
        return psycopg.connect(dsn, dbname=self.database, autocommit=True, connect_timeout=2)

    def reset(self) -> None:
        for dsn in self.dsns().values():
            try:
                with self._connect(dsn) as conn:
                    conn.execute("SELECT pg_stat_statements_reset()")
            except psycopg.Error:
                self.errors += 1

    def sample(self) -> None:
        for node, dsn in self.dsns().items():
            try:
                with self._connect(dsn) as conn:
                    (started,) = conn.execute("SELECT pg_postmaster_start_time()::text").fetchall()[
                        0
                    ]
                    rows = conn.execute(READ).fetchall()
                    unknown = [r[0] for r in rows if r[0] not in self.texts]
                    if unknown:
                        self.texts.update(conn.execute(TEXTS, [unknown]).fetchall())
            except psycopg.Error:
                self.errors += 1
                continue
            self.seen[(node, started)] = {q: tuple(counters) for q, *counters in rows}

    def run(self) -> None:
        while not self.stopping.wait(self.EVERY):
            self.sample()
        self.sample()

    def statements(self) -> dict[int, Statement]:
        """Every statement's counters summed over the nodes and their restarts."""
        out: dict[int, Statement] = {}
        for counters in self.seen.values():
            for queryid, (calls, plans, exec_ms, plan_ms) in counters.items():
                s = out.setdefault(queryid, Statement(self.texts.get(queryid, "")))
                s.calls += calls
                s.plans += plans
                s.exec_ms += exec_ms
                s.plan_ms += plan_ms
        return out


def profile(
    statements: Iterable[Statement],
    *,
    cpu: dict[str, float],
    runs: int,
    requests: dict[str, int],
) -> dict:
    """The profile's rows: each statement family's PostgreSQL time and each role group's CPU,
    in ms per run executed (`runs`) and per API request (`requests`: by endpoint)."""
    families: dict[str, list[float]] = defaultdict(lambda: [0, 0, 0.0, 0.0, 0])
    for s in statements:
        row = families[family(s.text)]
        row[0] += s.calls
        row[1] += s.plans
        row[2] += s.exec_ms
        row[3] += s.plan_ms
        row[4] += 1
    total_requests = sum(requests.values())
    out: dict = {"runs": runs, "requests": dict(requests), "families": [], "cpu": []}
    for name, (calls, plans, exec_ms, plan_ms, distinct) in sorted(
        families.items(), key=lambda kv: -(kv[1][2] + kv[1][3])
    ):
        ms = exec_ms + plan_ms
        out["families"].append(
            {
                "family": name,
                "statements": distinct,
                "calls": calls,
                "plans": plans,
                "exec_s": round(exec_ms / 1000, 1),
                "plan_s": round(plan_ms / 1000, 1),
                "ms_per_call": round(ms / calls, 3) if calls else 0.0,
                "ms_per_run": round(ms / runs, 3) if runs else None,
                "ms_per_request": _per_request(name, ms, requests, total_requests),
            }
        )
    for group, seconds in sorted(cpu.items(), key=lambda kv: -kv[1]):
        out["cpu"].append(
            {
                "group": group,
                "cpu_s": seconds,
                "ms_per_run": round(seconds * 1000 / runs, 3) if runs else None,
                "ms_per_request": round(seconds * 1000 / total_requests, 3)
                if total_requests
                else None,
            }
        )
    return out


def _per_request(name: str, ms: float, requests: dict[str, int], total: int) -> float | None:
    """An API family's time per request of its endpoint (per API request for the others that
    every request pays, authentication; None for the rest)."""
    endpoint = {
        "API: task list": "task_list",
        "API: task detail": "task_detail",
        "API: task runs": "task_runs",
        "API: run detail": "run_detail",
        "API: create": "create",
    }.get(name)
    if endpoint is not None:
        return round(ms / requests[endpoint], 3) if requests.get(endpoint) else None
    if name.startswith("API") and total:
        return round(ms / total, 3)
    return None


def rows(p: dict) -> list[str]:
    """The profile as a Markdown table (docs/benchmarks.md)."""

    def f(v: float | None) -> str:
        return "" if v is None else f"{v:,.3f}"

    lines = [
        "| PostgreSQL: statement family | calls | plans | exec + plan s | ms a call"
        " | ms per run | ms per request sent to its endpoint |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in p["families"]:
        lines.append(
            f"| {r['family']} | {r['calls']:,} | {r['plans']:,} | {r['exec_s']:,.1f}"
            f" + {r['plan_s']:,.1f}"
            f" | {r['ms_per_call']:.3f} | {f(r['ms_per_run'])} | {f(r['ms_per_request'])} |"
        )
    lines += ["", "| role processes | CPU s | ms per run | ms per API request sent |"]
    lines.append("| --- | --- | --- | --- |")
    for r in p["cpu"]:
        lines.append(
            f"| {r['group']} | {r['cpu_s']:,.1f} | {f(r['ms_per_run'])}"
            f" | {f(r['ms_per_request'])} |"
        )
    return lines


def print_profile(p: dict, write: Callable[..., None]) -> None:
    requests = ", ".join(f"{k} {v:,}" for k, v in sorted(p["requests"].items()))
    write()
    write(f"profile: {p['runs']:,} runs executed in the window; API requests: {requests}")
    for line in rows(p):
        write("  " + line)


def runs_executed(url: str, start: float, end: float) -> int:
    """Runs that finished (succeeded or failed) in the window."""
    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        (runs,) = conn.execute(
            "SELECT count(*) FROM tasks_run WHERE finished_at BETWEEN to_timestamp(%s)"
            " AND to_timestamp(%s) AND status IN ('succeeded', 'failed')",
            [start, end],
        ).fetchall()[0]
    return int(runs)


def save(path: Path, ledger: StatementLedger, **inputs: object) -> None:
    """The profile's inputs as JSON (the statements with their texts), to group again later:
    `python -m bench.day_profile <path>`."""
    statements = [vars(s) for s in ledger.statements().values()]
    path.write_text(json.dumps({"statements": statements, **inputs}))


def load(path: Path) -> dict:
    data = json.loads(path.read_text())
    statements = [Statement(**s) for s in data.pop("statements")]
    return profile(statements, **data)


if __name__ == "__main__":
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_project.settings")
    django.setup()
    print_profile(load(Path(sys.argv[1])), print)
