"""The workloads of `python -m bench` (docs/benchmarks.md):
each on a scratch database, printing JSON lines and then a table."""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
from typing import Any

from bench import BenchError, api, cycle, history, raw, recurring, scale, scratch, soak, workload

CORE = ["raw", "throughput", "lateness", "all", "api", "history", "scheduler", "soak", "cycle"]


def write(line: str = "") -> None:
    print(line, flush=True)


def emit(result: dict) -> None:
    write(json.dumps(result, default=str))


def _ints(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part]
    except ValueError:
        raise BenchError(f"expected a comma-separated list of integers, not {text!r}") from None


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    sub = top.add_subparsers(dest="workload", required=True, metavar="WORKLOAD")
    core = argparse.ArgumentParser(add_help=False)
    core.add_argument("--workers", default=None, help="W values, e.g. 1,2,4,8")
    core.add_argument("--n", type=int, default=10_000, help="runs per throughput round")
    core.add_argument("--raw-jobs", type=int, default=50_000)
    core.add_argument("--batch", default="1,10", help="raw: jobs claimed per transaction")
    core.add_argument("--jobs", type=int, default=2000, help="lateness: runs")
    core.add_argument("--window", type=float, default=60.0, help="lateness: seconds")
    core.add_argument("--repeat", type=int, default=3, help="repetitions (median)")
    core.add_argument("--processes", type=int, default=None, help="worker processes")
    core.add_argument("--keep-db", action="store_true", help="keep the scratch database")
    core.add_argument("--rate", type=float, default=150.0, help="api: reads/s")
    core.add_argument("--writes", type=float, default=5.0, help="api: writes/s")
    core.add_argument("--seconds", type=float, default=60.0, help="api/scheduler: seconds")
    core.add_argument("--find-max", action="store_true", help="api: step the rate up")
    teams = "api: the reader is an editor of N teams that own half the tasks (a colleague's)"
    core.add_argument("--teams", type=int, default=0, help=teams)
    gunicorn = "gunicorn --workers (default: scheduler_project/gunicorn_conf.py)"
    core.add_argument("--api-workers", type=int, default=None, help=gunicorn)
    threads = "gunicorn --threads; 1: sync workers (default: scheduler_project/gunicorn_conf.py)"
    core.add_argument("--api-threads", type=int, default=None, help=threads)
    core.add_argument("--rows", type=int, default=10_000_000, help="history: finished runs")
    core.add_argument("--tasks", type=int, default=100_000, help="scheduler: tasks")
    core.add_argument("--schedulers", default="1,2", help="scheduler: processes")
    core.add_argument("--runs", type=int, default=100_000, help="soak: runs")
    core.add_argument("--minutes", type=float, default=10.0, help="soak: minutes")
    core.add_argument("--api-runs", type=int, default=100_000, help="soak: runs in history")
    core.add_argument("--concurrency", type=int, default=4, help="cycle: worker slots")
    core.add_argument(
        "--worker-flags",
        default="",
        help="throughput: more runworker flags, e.g. '--cpu 64 --memory 256Gi'",
    )
    core.add_argument(
        "--key-limit",
        type=int,
        default=None,
        help="throughput: also rounds with every run under one concurrency key of this limit, "
        "interleaved with the unkeyed ones (their ratio is printed)",
    )
    core.add_argument("--claim-ahead", type=int, default=None, help="cycle: override")
    core.add_argument("--api-requests", type=int, default=1000, help="soak: API requests")
    for name in CORE:
        sub.add_parser(name, parents=[core], help=f"{name} (docs/benchmarks.md)")

    late = sub.add_parser("recurring", help="start lateness of recurring tasks, idle workers")
    late.add_argument("--tasks", type=int, default=100, help="recurring tasks")
    late.add_argument("--seconds", type=float, default=60.0, help="measured window")
    late.add_argument("--schedulers", type=int, default=3)
    late.add_argument("--workers", type=int, default=3, help="worker processes")
    late.add_argument("--concurrency", type=int, default=4, help="slots per worker")
    lookahead = "TASKS_LOOKAHEAD_SECONDS for the fleet"
    late.add_argument("--lookahead", type=float, default=None, help=lookahead)
    late.add_argument("--log-level", default="WARNING", help="LOG_LEVEL of the fleet")
    late.add_argument("--keep-db", action="store_true", help="keep the scratch database")

    mixed = sub.add_parser("mix", help="recurring lateness: N schedulers, interval + cron mix")
    mixed.add_argument("--schedulers", type=int, default=3)
    mixed.add_argument("--workers", type=int, default=2, help="worker processes")
    mixed.add_argument("--concurrency", type=int, default=4, help="slots per worker")
    mixed.add_argument("--intervals", type=int, default=20, help="interval tasks")
    mixed.add_argument("--every", type=int, default=2, help="their interval, seconds")
    mixed.add_argument("--crons", type=int, default=10, help="six-field cron tasks")
    mixed.add_argument("--cron", default="*/3 * * * * *", help="their expression")
    mixed.add_argument("--seconds", type=float, default=60.0, help="measured window")
    mixed.add_argument("--spread", type=float, default=5.0, help="seconds to create them over")
    mixed.add_argument("--keep-db", action="store_true", help="keep the scratch database")

    note = sub.add_parser("notify", help="run finished -> webhook arrived, real workers")
    note.add_argument("--runs", type=int, default=200)
    note.add_argument("--workers", type=int, default=2, help="worker processes")
    note.add_argument("--concurrency", type=int, default=4, help="slots per worker")
    note.add_argument("--spacing", type=float, default=0.05, help="seconds between runs")
    note.add_argument("--timeout", type=float, default=120.0, help="give up after")
    note.add_argument("--keep", action="store_true", help="keep rows and role logs")
    note.add_argument("--json", action="store_true", help="print one JSON object")

    plans = sub.add_parser("plans", help="the API's prepared reads under each plan_cache_mode")
    plans.add_argument("--repeat", type=int, default=300)
    plans.add_argument("--keep-db", action="store_true", help="keep the scratch database")

    visible = sub.add_parser("visible", help="a team member's task list against a personal one")
    visible.add_argument("--others", type=int, default=10, help="users not measured")
    visible.add_argument("--tasks", type=int, default=1000, help="tasks per user and per team")
    visible.add_argument("--own", type=int, default=200, help="the member's personal tasks")
    visible.add_argument("--repeat", type=int, default=30)
    visible.add_argument("--keep-db", action="store_true", help="keep the scratch database")

    admin = sub.add_parser("admin", help="every console page over a million runs")
    admin.add_argument("--runs", type=int, default=1_000_000)
    admin.add_argument("--tasks", type=int, default=100_000)
    admin.add_argument("--repeat", type=int, default=20, help="rounds timed (p50, p95)")
    admin.add_argument("--only", default="", help="the pages whose label holds this text")
    admin.add_argument("--keep-db", action="store_true", help="keep the scratch database")
    reuse = "time over the scratch database a --keep-db run left (its data set reused)"
    admin.add_argument("--reuse-db", action="store_true", help=reuse)

    day = sub.add_parser("day", help="a production day, time-compressed, with faults")
    day.add_argument("--minutes", type=float, default=20.0, help="the window (a day's shape)")
    day.add_argument("--tasks", type=int, default=100_000, help="active tasks")
    day.add_argument("--reads", type=float, default=150.0, help="API reads/s")
    day.add_argument("--writes", type=float, default=5.0, help="API creates/s")
    day.add_argument("--floors", type=float, default=10.0, help="trivial endpoint requests/s")
    day.add_argument("--keep", action="store_true", help="keep the logs' folder")

    batch = sub.add_parser("batch", help="the API's CPU per task created by the batch route")
    batch.add_argument("--n", type=int, default=1000, help="tasks per batch")
    batch.add_argument("--rounds", type=int, default=5)
    batch.add_argument("--processes", type=int, default=2, help="runworker processes")
    batch.add_argument("--concurrency", type=int, default=4, help="runworker --concurrency")
    batch.add_argument("--keep-db", action="store_true", help="keep the scratch database")

    sets = sub.add_parser("tasksets", help="one task set's plan and apply, in-process")
    sets.add_argument("--n", type=int, default=1000, help="entries of the set")
    sets.add_argument("--keep-db", action="store_true", help="keep the scratch database")
    held = sub.add_parser("held_snapshot", help="pickup while an old transaction holds vacuum")
    held.add_argument("--seconds", type=float, default=600.0, help="the fed window")
    held.add_argument("--rate", type=float, default=120.0, help="runs due a second")
    hold = held.add_mutually_exclusive_group()
    hold.add_argument("--hold", action="store_true", help="hold a snapshot the whole window")
    both = "a window without the hold, then one with it (the baseline from the same run)"
    hold.add_argument("--compare", action="store_true", help=both)
    held.add_argument("--keep-db", action="store_true", help="keep the scratch database")
    flows = sub.add_parser("workflow", help="fan-out/fan-in and hand-offs against plain runs")
    flows.add_argument("--n", type=int, default=1000, help="children (and independent runs)")
    flows.add_argument("--rounds", type=int, default=100, help="hand-offs timed")
    flows.add_argument("--workers", type=int, default=4, help="worker slots")
    flows.add_argument("--processes", type=int, default=None, help="worker processes")
    flows.add_argument("--keep-db", action="store_true", help="keep the scratch database")
    return top


def main(argv: list[str]) -> int:
    options = vars(parser().parse_args(argv))
    try:
        kind = options["workload"]
        if kind == "recurring":
            run_recurring(options)
        elif kind == "mix":
            from bench import mix

            with scratch.database("mix", keep=options.pop("keep_db")) as url:
                del options["workload"]
                emit(mix.measure(database_url=url, **options))
        elif kind == "notify":
            from bench import notify

            notify.NotifyBench(write=write).handle(**options)
        elif kind == "plans":
            from bench import plans

            with scratch.database("plans", keep=options["keep_db"]):
                plans.measure(repeat=options["repeat"], emit=emit, write=write)
        elif kind == "visible":
            from bench import visible

            with scratch.database("visible", keep=options.pop("keep_db")):
                del options["workload"]
                visible.measure(**options, emit=emit, write=write)
        elif kind == "admin":
            from bench import admin

            keep, reuse = options["keep_db"] or options["reuse_db"], options["reuse_db"]
            with scratch.database("admin", keep=keep, reuse=reuse), admin.test_hosts():
                admin.populate(options["runs"], tasks=options["tasks"], write=write)
                admin.measure(options["repeat"], only=options["only"], write=write)
        elif kind == "day":
            from bench import day

            del options["workload"]
            day.measure(**options, emit=emit, write=write)
        elif kind == "batch":
            from bench import batch

            with scratch.database("batch", keep=options["keep_db"]) as url:
                batch.measure(
                    n=options["n"],
                    rounds=options["rounds"],
                    database_url=url,
                    processes=options["processes"],
                    concurrency=options["concurrency"],
                )
        elif kind == "tasksets":
            from bench import tasksets

            with scratch.database("tasksets", keep=options["keep_db"]):
                tasksets.measure(options["n"])
        elif kind == "held_snapshot":
            from bench import held_snapshot

            holds = [False, True] if options["compare"] else [options["hold"]]
            with scratch.database("held", keep=options["keep_db"]) as url:
                for hold in holds:
                    held_snapshot.measure(
                        database_url=url,
                        seconds=options["seconds"],
                        rate=options["rate"],
                        hold=hold,
                        emit=emit,
                        write=write,
                    )
        elif kind == "workflow":
            from bench import workflow

            with scratch.database("workflow", keep=options["keep_db"]) as url:
                workflow.measure(
                    database_url=url,
                    n=options["n"],
                    rounds=options["rounds"],
                    workers=options["workers"],
                    processes=options["processes"],
                    write=write,
                )
        else:
            run_core(options)
    except BenchError as error:
        print(f"bench {options['workload']}: {error}", file=sys.stderr)
        return 1
    return 0


def run_core(options: dict[str, Any]) -> None:
    results: list[dict] = []
    kind = options["workload"]
    with scratch.database("bench", keep=options["keep_db"]) as url:
        if kind in ("raw", "all"):
            workers = _ints(options["workers"] or ("4" if kind == "all" else "1,2,4,8"))
            for batch in _ints(options["batch"]):
                for w in workers:
                    rounds = [
                        raw.run_raw(url, workers=w, batch=batch, jobs=options["raw_jobs"])
                        for _ in range(options["repeat"])
                    ]
                    results.append(_median(rounds, label=f"raw claim {batch}/tx"))
        if kind in ("throughput", "all"):
            for w in _ints(options["workers"] or "1,2,4,8"):
                results.extend(_throughput(url, w, options))
        if kind in ("lateness", "all"):
            w = _ints(options["workers"] or "4")[0] if kind == "lateness" else 4
            result = workload.lateness(
                database_url=url, workers=w, jobs=options["jobs"], window=options["window"]
            )
            emit(result)
            results.append(result)
        if kind == "api":
            api.measure(
                database_url=url,
                rate=options["rate"],
                writes=options["writes"],
                seconds=options["seconds"],
                find_max=options["find_max"],
                api_workers=options["api_workers"],
                api_threads=options["api_threads"],
                tasks=1000,
                runs_per_task=20,
                teams=options["teams"],
                emit=emit,
                write=write,
            )
        if kind == "history":
            history.measure(
                database_url=url,
                rows=options["rows"],
                n=options["n"],
                workers=_ints(options["workers"] or "4")[0],
                repeat=options["repeat"],
                emit=emit,
                write=write,
            )
        if kind == "scheduler":
            scale.measure(
                database_url=url,
                tasks=options["tasks"],
                seconds=options["seconds"],
                schedulers=_ints(options["schedulers"]),
                emit=emit,
                write=write,
            )
        if kind == "soak":
            soak.measure(
                database_url=url,
                runs=options["runs"],
                minutes=options["minutes"],
                workers=_ints(options["workers"] or "4")[0],
                processes=options["processes"],
                api_runs=options["api_runs"],
                api_requests=options["api_requests"],
                api_workers=options["api_workers"],
                emit=emit,
                write=write,
            )
        if kind == "cycle":
            cycle.measure(
                n=options["n"],
                concurrency=options["concurrency"],
                claim_ahead=options["claim_ahead"],
                emit=emit,
                write=write,
            )
    if results:
        _table(results)


def _throughput(url: str, workers: int, options: dict[str, Any]) -> list[dict]:
    """Throughput at W = `workers`, median of the rounds. With --key-limit, each repeat runs an
    unkeyed round and then one with every run under one key of that limit, so that the two
    medians and their ratio come from the same minutes of a shared machine."""
    limits = [None] if options["key_limit"] is None else [None, options["key_limit"]]
    rounds: dict[int | None, list[dict]] = {limit: [] for limit in limits}
    for _ in range(options["repeat"]):
        for limit in limits:
            rounds[limit].append(
                workload.throughput(
                    database_url=url,
                    workers=workers,
                    n=options["n"],
                    processes=options["processes"],
                    worker_flags=shlex.split(options["worker_flags"]),
                    key_limit=limit,
                )
            )
    results = [
        _median(rounds[limit], label="scheduler" if limit is None else f"one key of limit {limit}")
        for limit in limits
    ]
    if len(results) == 2:
        ratio = results[1]["median_rate"] / results[0]["median_rate"]
        results[1]["ratio"] = round(ratio, 2)
        emit({"workload": "throughput", "keyed_over_unkeyed": round(ratio, 2)})
    return results


def run_recurring(options: dict[str, Any]) -> None:
    if options["tasks"] < 1 or options["seconds"] <= 0:
        raise BenchError("--tasks and --seconds must be positive")
    with scratch.database("lateness", keep=options["keep_db"]) as url:
        result = recurring.measure(
            database_url=url,
            tasks=options["tasks"],
            seconds=options["seconds"],
            schedulers=options["schedulers"],
            workers=options["workers"],
            concurrency=options["concurrency"],
            lookahead=options["lookahead"],
            log_level=options["log_level"],
        )
    write(json.dumps(result))
    write()
    for label, key in (
        ("occurrences", "occurrences"),
        ("missing", "missing"),
        ("executed twice", "ran_twice"),
        ("p50 ms", "p50_ms"),
        ("p95 ms", "p95_ms"),
        ("p99 ms", "p99_ms"),
        ("max ms", "max_ms"),
        ("min ms", "min_ms"),
        ("early starts", "early"),
        ("body p99 ms", "body_p99_ms"),
        ("body early", "body_early"),
    ):
        write(f"{label:<16} {result[key]:>10}")


def _median(rounds: list[Any], *, label: str) -> dict:
    dicts = [r if isinstance(r, dict) else dict(vars(r)) for r in rounds]
    for one in dicts:
        emit({**one, "label": label})
    best = sorted(dicts, key=lambda d: d["rate"])[len(dicts) // 2]
    return {
        **best,
        "label": label,
        "rates": [d["rate"] for d in dicts],
        "median_rate": statistics.median(d["rate"] for d in dicts),
    }


def _table(results: list[dict]) -> None:
    write()
    write(f"{'measurement':<28} {'W':>3} {'runs/s (median)':>16}  detail")
    for r in results:
        if r.get("workload") == "lateness":
            write(
                f"{'lateness':<28} {r['workers']:>3} {'':>16}  p50 {r['p50_ms']} ms, "
                f"p99 {r['p99_ms']} ms, max {r['max_ms']} ms, min {r['min_ms']} ms, "
                f"early {r['early']}, missing {r['missing']}; floor (a sleeping thread, same "
                f"window) p99 {r['floor']['p99_ms']} ms, max {r['floor']['max_ms']} ms"
            )
        else:
            detail = f"rounds {r['rates']}"
            if "ratio" in r:
                detail += f", {r['ratio']}x the unkeyed median"
            if "processes" in r:
                detail += f", {r['processes']} x --concurrency {r['concurrency']}"
            write(f"{r['label']:<28} {r['workers']:>3} {r['median_rate']:>16.1f}  {detail}")
