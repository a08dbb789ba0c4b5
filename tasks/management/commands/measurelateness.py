"""`manage.py measurelateness`: start lateness of recurring tasks with idle workers (issue 3)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import psycopg
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from tasks.bench import recurring


class Command(BaseCommand):
    help = (
        "Start real schedulers and workers on a scratch database, run N recurring tasks for S "
        "seconds and print start lateness (database clock) as a JSON line and a table."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--tasks", type=int, default=100, help="recurring tasks")
        parser.add_argument("--seconds", type=float, default=60.0, help="measured window")
        parser.add_argument("--schedulers", type=int, default=3)
        parser.add_argument("--workers", type=int, default=3, help="worker processes")
        parser.add_argument("--concurrency", type=int, default=4, help="slots per worker")
        parser.add_argument(
            "--lookahead", type=float, default=None, help="TASKS_LOOKAHEAD_SECONDS for the fleet"
        )
        parser.add_argument("--log-level", default="WARNING", help="LOG_LEVEL of the fleet")
        parser.add_argument("--keep-db", action="store_true", help="keep the scratch database")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["tasks"] < 1 or options["seconds"] <= 0:
            raise CommandError("--tasks and --seconds must be positive")
        base = dict(settings.DATABASES["default"])
        scratch = f"{base['NAME']}_lateness"
        admin = _admin_conninfo(base)
        with psycopg.connect(autocommit=True, **admin) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{scratch}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{scratch}"')
        try:
            connection.close()
            settings.DATABASES["default"]["NAME"] = scratch
            connection.settings_dict["NAME"] = scratch
            call_command("migrate", verbosity=0)
            result = recurring.measure(
                database_url=_url(base, scratch),
                tasks=options["tasks"],
                seconds=options["seconds"],
                schedulers=options["schedulers"],
                workers=options["workers"],
                concurrency=options["concurrency"],
                lookahead=options["lookahead"],
                log_level=options["log_level"],
            )
        finally:
            connection.close()
            settings.DATABASES["default"]["NAME"] = base["NAME"]
            connection.settings_dict["NAME"] = base["NAME"]
            if not options["keep_db"]:
                with psycopg.connect(autocommit=True, **admin) as conn:
                    conn.execute(f'DROP DATABASE IF EXISTS "{scratch}" WITH (FORCE)')
        self.stdout.write(json.dumps(result))
        self.stdout.write("")
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
            self.stdout.write(f"{label:<16} {result[key]:>10}")


def _admin_conninfo(base: dict) -> dict[str, str]:
    params = {"dbname": "postgres", "user": base.get("USER") or "postgres"}
    for key, name in (("HOST", "host"), ("PORT", "port"), ("PASSWORD", "password")):
        if base.get(key):
            params[name] = str(base[key])
    return params


def _url(base: dict, name: str) -> str:
    auth = quote(base.get("USER") or "postgres", safe="")
    if base.get("PASSWORD"):
        auth += ":" + quote(base["PASSWORD"], safe="")
    port = f":{base['PORT']}" if base.get("PORT") else ""
    return f"postgres://{auth}@{quote(base.get('HOST') or '', safe='')}{port}/{name}"
