"""`manage.py bench`: BENCHMARK.md's workloads on a scratch database; JSON lines and a table."""

from __future__ import annotations

import json
import statistics
from typing import Any
from urllib.parse import quote

import psycopg
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from tasks.bench import api, cycle, history, raw, scale, soak, workload


def _ints(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part]
    except ValueError:
        raise CommandError(f"expected a comma-separated list of integers, not {text!r}") from None


class Command(BaseCommand):
    help = "Run the benchmark workloads of BENCHMARK.md (raw limit, throughput, lateness)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "workload",
            choices=[
                "raw",
                "throughput",
                "lateness",
                "all",
                "api",
                "history",
                "scheduler",
                "soak",
                "cycle",
            ],
        )
        parser.add_argument("--workers", default=None, help="W values, e.g. 1,2,4,8")
        parser.add_argument("--n", type=int, default=10_000, help="runs per throughput round")
        parser.add_argument("--raw-jobs", type=int, default=50_000)
        parser.add_argument("--batch", default="1,10", help="raw: jobs claimed per transaction")
        parser.add_argument("--jobs", type=int, default=2000, help="lateness: runs")
        parser.add_argument("--window", type=float, default=60.0, help="lateness: seconds")
        parser.add_argument("--repeat", type=int, default=3, help="repetitions (median)")
        parser.add_argument("--processes", type=int, default=None, help="worker processes")
        parser.add_argument("--keep-db", action="store_true", help="keep the scratch database")
        # api, history, scheduler, soak (issue 7 items 5-8)
        parser.add_argument("--rate", type=float, default=150.0, help="api: reads/s")
        parser.add_argument("--writes", type=float, default=5.0, help="api: writes/s")
        parser.add_argument("--seconds", type=float, default=60.0, help="api/scheduler: seconds")
        parser.add_argument("--find-max", action="store_true", help="api: step the rate up")
        parser.add_argument(
            "--api-workers",
            type=int,
            default=None,
            help="gunicorn --workers (default: scheduler_project/gunicorn_conf.py)",
        )
        parser.add_argument("--rows", type=int, default=10_000_000, help="history: finished runs")
        parser.add_argument("--tasks", type=int, default=100_000, help="scheduler: tasks")
        parser.add_argument("--schedulers", default="1,2", help="scheduler: processes")
        parser.add_argument("--runs", type=int, default=100_000, help="soak: runs")
        parser.add_argument("--minutes", type=float, default=10.0, help="soak: minutes")
        parser.add_argument("--api-runs", type=int, default=100_000, help="soak: runs in history")
        parser.add_argument("--concurrency", type=int, default=4, help="cycle: worker slots")
        parser.add_argument("--claim-ahead", type=int, default=None, help="cycle: override")
        parser.add_argument("--api-requests", type=int, default=1000, help="soak: API requests")

    def handle(self, *args: Any, **options: Any) -> None:
        base = settings.DATABASES["default"]
        scratch = f"{base['NAME']}_bench"
        self._create_database(base, scratch)
        results: list[dict] = []
        try:
            url = self._switch_to(base, scratch)
            kind = options["workload"]
            if kind in ("raw", "all"):
                workers = _ints(options["workers"] or ("4" if kind == "all" else "1,2,4,8"))
                for batch in _ints(options["batch"]):
                    for w in workers:
                        rounds = [
                            raw.run_raw(url, workers=w, batch=batch, jobs=options["raw_jobs"])
                            for _ in range(options["repeat"])
                        ]
                        results.append(self._median(rounds, label=f"raw claim {batch}/tx"))
            if kind in ("throughput", "all"):
                for w in _ints(options["workers"] or "1,2,4,8"):
                    rounds = [
                        workload.throughput(
                            database_url=url, workers=w, n=options["n"],
                            processes=options["processes"],
                        )
                        for _ in range(options["repeat"])
                    ]  # fmt: skip
                    results.append(self._median(rounds, label="scheduler"))
            if kind in ("lateness", "all"):
                w = _ints(options["workers"] or "4")[0] if kind == "lateness" else 4
                result = workload.lateness(
                    database_url=url, workers=w, jobs=options["jobs"], window=options["window"]
                )
                self._emit(result)
                results.append(result)
            if kind == "api":
                api.measure(
                    database_url=url, rate=options["rate"], writes=options["writes"],
                    seconds=options["seconds"], find_max=options["find_max"],
                    api_workers=options["api_workers"], tasks=1000, runs_per_task=20,
                    emit=self._emit, write=self.stdout.write,
                )  # fmt: skip
            if kind == "history":
                history.measure(
                    database_url=url, rows=options["rows"], n=options["n"],
                    workers=_ints(options["workers"] or "4")[0], repeat=options["repeat"],
                    emit=self._emit, write=self.stdout.write,
                )  # fmt: skip
            if kind == "scheduler":
                scale.measure(
                    database_url=url, tasks=options["tasks"], seconds=options["seconds"],
                    schedulers=_ints(options["schedulers"]),
                    emit=self._emit, write=self.stdout.write,
                )  # fmt: skip
            if kind == "soak":
                soak.measure(
                    database_url=url, runs=options["runs"], minutes=options["minutes"],
                    workers=_ints(options["workers"] or "4")[0], processes=options["processes"],
                    api_runs=options["api_runs"], api_requests=options["api_requests"],
                    api_workers=options["api_workers"], emit=self._emit, write=self.stdout.write,
                )  # fmt: skip
            if kind == "cycle":
                cycle.measure(
                    n=options["n"], concurrency=options["concurrency"],
                    claim_ahead=options["claim_ahead"], emit=self._emit, write=self.stdout.write,
                )  # fmt: skip
        finally:
            connection.close()
            settings.DATABASES["default"]["NAME"] = base["NAME"]
            if not options["keep_db"]:
                self._drop_database(base, scratch)
        if results:
            self._table(results)

    def _median(self, rounds: list[Any], *, label: str) -> dict:
        dicts = [r if isinstance(r, dict) else dict(vars(r)) for r in rounds]
        for one in dicts:
            self._emit({**one, "label": label})
        best = sorted(dicts, key=lambda d: d["rate"])[len(dicts) // 2]
        return {**best, "label": label, "rates": [d["rate"] for d in dicts],
                "median_rate": statistics.median(d["rate"] for d in dicts)}  # fmt: skip

    def _emit(self, result: dict) -> None:
        self.stdout.write(json.dumps(result, default=str))

    def _table(self, results: list[dict]) -> None:
        self.stdout.write("")
        self.stdout.write(f"{'measurement':<28} {'W':>3} {'runs/s (median)':>16}  detail")
        for r in results:
            if r.get("workload") == "lateness":
                self.stdout.write(
                    f"{'lateness':<28} {r['workers']:>3} {'':>16}  p50 {r['p50_ms']} ms, "
                    f"p99 {r['p99_ms']} ms, max {r['max_ms']} ms, min {r['min_ms']} ms, "
                    f"early {r['early']}, missing {r['missing']}"
                )
            else:
                detail = f"rounds {r['rates']}"
                if "processes" in r:
                    detail += f", {r['processes']} x --concurrency {r['concurrency']}"
                self.stdout.write(
                    f"{r['label']:<28} {r['workers']:>3} {r['median_rate']:>16.1f}  {detail}"
                )

    @staticmethod
    def _admin_conninfo(base: dict) -> dict:
        params = {"dbname": "postgres", "user": base.get("USER") or "postgres"}
        if base.get("HOST"):
            params["host"] = base["HOST"]
        if base.get("PORT"):
            params["port"] = str(base["PORT"])
        if base.get("PASSWORD"):
            params["password"] = base["PASSWORD"]
        return params

    def _create_database(self, base: dict, name: str) -> None:
        with psycopg.connect(autocommit=True, **self._admin_conninfo(base)) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')

    def _drop_database(self, base: dict, name: str) -> None:
        with psycopg.connect(autocommit=True, **self._admin_conninfo(base)) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def _switch_to(self, base: dict, name: str) -> str:
        connection.close()
        settings.DATABASES["default"]["NAME"] = name
        connection.settings_dict["NAME"] = name
        call_command("migrate", verbosity=0)
        host = quote(base.get("HOST") or "", safe="")
        auth = quote(base.get("USER") or "postgres", safe="")
        if base.get("PASSWORD"):
            auth += ":" + quote(base["PASSWORD"], safe="")
        port = f":{base['PORT']}" if base.get("PORT") else ""
        return f"postgres://{auth}@{host}{port}/{name}"
